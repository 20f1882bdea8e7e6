import { useState } from 'preact/hooks';
import { api, failed, type Data, type Failed } from '../api';
import { count } from '../format';
import { Failure, Figure, Screen } from '../ui';

type PurgeResult = Data<'/api/v1/ops/players/guests/purge', 'post'>;

const UNITS = { days: 86_400, hours: 3_600, minutes: 60 } as const;
type Unit = keyof typeof UNITS;

/**
 * Bulk erasure of unclaimed guests: a dry run counts them first, and the
 * real purge only goes ahead with that count typed back, so the server can
 * refuse when the set moved in between.
 */
export function GuestPurge(props: { canErase: boolean }) {
  const [amount, setAmount] = useState('30');
  const [unit, setUnit] = useState<Unit>('days');
  const [dry, setDry] = useState<PurgeResult | null>(null);
  const [echo, setEcho] = useState('');
  const [done, setDone] = useState<PurgeResult | null>(null);
  const [error, setError] = useState<Failed | null>(null);
  const [busy, setBusy] = useState(false);
  const seconds = Math.max(0, Math.floor(Number(amount) || 0)) * UNITS[unit];

  const run = async (body: { dry_run: true } | { confirm_count: number }) => {
    setBusy(true);
    setError(null);
    try {
      return (await api.post('/api/v1/ops/players/guests/purge', { body: { inactive_for_seconds: seconds, ...body } })).data;
    } catch (err) {
      setError(failed(err));
      return null;
    } finally {
      setBusy(false);
    }
  };
  const dryRun = async (e: Event) => {
    e.preventDefault();
    setDone(null);
    setEcho('');
    setDry(await run({ dry_run: true }));
  };
  const purge = async (e: Event) => {
    e.preventDefault();
    const result = await run({ confirm_count: Number(echo) });
    if (result) {
      setDone(result);
      setDry(null);
      setEcho('');
    }
  };

  if (!props.canErase) {
    return (
      <Screen title="Guest purge">
        <p class="notice">
          Purging guests needs the <code>erasure</code> capability, which console sessions hold only when the server sets <code>console_erasure</code>.
        </p>
      </Screen>
    );
  }
  return (
    <Screen title="Guest purge" subtitle="Erase unclaimed guest accounts nobody has used for a while. Count first, then confirm the count.">
      <form class="controls" onSubmit={dryRun}>
        <label class="inline">
          Unused for
          <input name="amount" type="number" min="0" value={amount} onInput={(e) => (setAmount((e.target as HTMLInputElement).value), setDry(null))} size={6} />
        </label>
        <select name="unit" value={unit} onChange={(e) => (setUnit((e.target as HTMLSelectElement).value as Unit), setDry(null))} aria-label="Unit">
          <option value="days">days</option>
          <option value="hours">hours</option>
          <option value="minutes">minutes</option>
        </select>
        <button type="submit" disabled={busy}>
          Dry run
        </button>
      </form>
      <Failure error={error} />
      {dry ? (
        <form class="card" onSubmit={purge} data-testid="purge-confirm">
          <p>
            <strong data-testid="purge-matched">{count(dry.matched)}</strong> unclaimed guests were unused for {amount} {unit}. Nothing was deleted.
          </p>
          {dry.matched > 0 ? (
            <>
              <label>
                Type {dry.matched} to erase them
                <input name="confirm" inputMode="numeric" autocomplete="off" value={echo} onInput={(e) => setEcho((e.target as HTMLInputElement).value)} />
              </label>
              <button type="submit" class="danger" disabled={busy || echo.trim() === ''}>
                Purge guests
              </button>
            </>
          ) : null}
        </form>
      ) : null}
      {done ? (
        <div class="figures" data-testid="purge-result">
          <Figure label="Deleted" value={count(done.deleted)} />
          <Figure label="Skipped" value={count(done.skipped)} hint="claimed or seen meanwhile" />
          <Figure label="Failed" value={count(done.failed)} />
          <Figure label="Remaining" value={count(done.remaining)} hint={done.remaining > 0 ? 'run again to continue' : undefined} />
        </div>
      ) : null}
    </Screen>
  );
}
