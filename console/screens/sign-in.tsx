import { useState } from 'preact/hooks';
import { ServiceError } from '../../client';
import { openSession } from '../api';

/** The secret opens a session; the label only names the person on audit rows. */
export function SignIn(props: { onSignedIn: () => void }) {
  const [secret, setSecret] = useState('');
  const [label, setLabel] = useState('');
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      await openSession(secret, label.trim());
      setSecret('');
      props.onSignedIn();
    } catch (err) {
      const failure = err instanceof ServiceError ? err : null;
      setError(
        failure?.status === 403
          ? 'That is not the operator secret.'
          : failure?.status === 429
            ? 'Too many attempts; wait a moment and try again.'
            : failure?.status === 422
              ? 'The name must be 1–64 printable ASCII characters without a comma.'
              : (failure?.message ?? 'The server could not be reached.'),
      );
    } finally {
      setBusy(false);
    }
  };
  return (
    <main class="sign-in">
      <form onSubmit={submit} class="card">
        <h1>
          svc <span>console</span>
        </h1>
        <p class="muted">Sign in with the operator secret (the <code>ops_secret</code> setting).</p>
        <label>
          Operator secret
          <input type="password" name="secret" autocomplete="current-password" required value={secret} onInput={(e) => setSecret((e.target as HTMLInputElement).value)} />
        </label>
        <label>
          Your name <span class="muted">(optional, shown on audit rows)</span>
          <input name="label" maxLength={64} autocomplete="nickname" value={label} onInput={(e) => setLabel((e.target as HTMLInputElement).value)} />
        </label>
        {error ? (
          <p class="notice error" role="alert">
            {error}
          </p>
        ) : null}
        <button type="submit" class="primary" disabled={busy || secret === ''}>
          Sign in
        </button>
      </form>
    </main>
  );
}
