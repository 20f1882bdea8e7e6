import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { failed, type Failed } from './api';

export interface Loaded<T> {
  data: T | null;
  error: Failed | null;
  loading: boolean;
  reload: () => void;
}

/**
 * Runs `load` whenever `key` changes (a list's address, a player's id), on
 * `reload`, and every `everyMs` while mounted (live figures); an answer to an
 * older key never overwrites a newer one.
 */
export function useLoad<T>(key: string, load: () => Promise<T>, options: { everyMs?: number } = {}): Loaded<T> {
  const [state, setState] = useState<{ data: T | null; error: Failed | null; loading: boolean; key: string }>({ data: null, error: null, loading: true, key });
  const latest = useRef(0);
  const loadRef = useRef(load);
  loadRef.current = load;
  const run = useCallback(() => {
    const ticket = ++latest.current;
    setState((s) => ({ ...s, loading: true, key, ...(s.key !== key ? { data: null, error: null } : {}) }));
    loadRef.current().then(
      (data) => ticket === latest.current && setState({ data, error: null, loading: false, key }),
      (err: unknown) => {
        const error = failed(err);
        if (ticket === latest.current) setState((s) => ({ ...s, error, loading: false, key }));
      },
    );
  }, [key]);
  useEffect(() => {
    run();
    if (!options.everyMs) return;
    const timer = setInterval(run, options.everyMs);
    return () => clearInterval(timer);
  }, [run, options.everyMs]);
  return { data: state.key === key ? state.data : null, error: state.error, loading: state.loading, reload: run };
}
