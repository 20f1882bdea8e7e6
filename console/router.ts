import { useEffect, useState } from 'preact/hooks';

/**
 * History routing under `/console`: every screen has a real address, so a
 * link can be bookmarked or shared, and the host answers any such address
 * with the app's index.html.
 */

export const BASE = '/console';

export interface Location {
  /** The path below `/console`, always starting with `/`. */
  path: string;
  query: URLSearchParams;
}

function current(): Location {
  const below = window.location.pathname.startsWith(BASE) ? window.location.pathname.slice(BASE.length) : '/';
  return { path: below === '' ? '/' : below, query: new URLSearchParams(window.location.search) };
}

const listeners = new Set<() => void>();
window.addEventListener('popstate', () => listeners.forEach((l) => l()));

export function navigate(to: string, options: { replace?: boolean } = {}): void {
  const url = BASE + (to === '/' ? '' : to);
  if (url === window.location.pathname + window.location.search) return;
  if (options.replace) history.replaceState(null, '', url);
  else history.pushState(null, '', url);
  listeners.forEach((l) => l());
  if (!options.replace) window.scrollTo(0, 0);
}

export function useLocation(): Location {
  const [location, setLocation] = useState(current);
  useEffect(() => {
    const update = () => setLocation(current());
    listeners.add(update);
    return () => void listeners.delete(update);
  }, []);
  return location;
}

/** Replaces some query values of the current address (a list's search, sort and page live there). */
export function setQuery(changes: Record<string, string | null>): void {
  const { path, query } = current();
  for (const [key, value] of Object.entries(changes)) {
    if (value === null || value === '') query.delete(key);
    else query.set(key, value);
  }
  const text = query.toString();
  navigate(path + (text ? `?${text}` : ''), { replace: true });
}

/** Matches `/players/:id` style patterns; params come back decoded. */
export function match(pattern: string, path: string): Record<string, string> | null {
  const want = pattern.split('/');
  const got = path.replace(/\/$/, '').split('/');
  if (want.length !== got.length) return null;
  const params: Record<string, string> = {};
  for (let i = 0; i < want.length; i++) {
    const w = want[i]!;
    const g = got[i]!;
    if (w.startsWith(':')) {
      if (!g) return null;
      try {
        params[w.slice(1)] = decodeURIComponent(g);
      } catch {
        return null;
      }
    } else if (w !== g) return null;
  }
  return params;
}

/** A plain link that moves within the app without reloading it. */
export function href(to: string): { href: string; onClick: (e: MouseEvent) => void } {
  return {
    href: BASE + (to === '/' ? '' : to),
    onClick: (e: MouseEvent) => {
      if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
      e.preventDefault();
      navigate(to);
    },
  };
}
