import { useEffect, useState } from 'preact/hooks';
import { api } from './api';
import { shortId } from './format';
import { Link } from './ui';

// Names already looked up, for this page's lifetime; an erased player stays a bare id.
const names = new Map<string, Promise<string | null>>();

function nameOf(id: string): Promise<string | null> {
  let name = names.get(id);
  if (!name) {
    name = api.get('/api/v1/ops/players/{id}', { path: { id } }).then(
      (p) => p.data.display_name ?? p.data.username,
      () => null,
    );
    names.set(id, name);
  }
  return name;
}

/** A player id shown as the player's name once known, linking to the player page. */
export function PlayerName({ id }: { id: string }) {
  const [name, setName] = useState<string | null>(null);
  useEffect(() => {
    let live = true;
    void nameOf(id).then((n) => live && setName(n));
    return () => {
      live = false;
    };
  }, [id]);
  return (
    <Link to={`/players/${id}`}>
      <span title={id}>{name ?? shortId(id)}</span>
    </Link>
  );
}
