import { useEffect, useState } from 'preact/hooks';
import { api, endSession, readSession, whenSignedOut, type ConsoleSession, type Data } from './api';
import { href, match, navigate, useLocation } from './router';
import { SignIn } from './screens/sign-in';
import { Overview } from './screens/overview';
import { PlayerList, PlayerPage } from './screens/players';
import { Matches } from './screens/matches';
import { Matchmaker } from './screens/matchmaker';
import { BoardEntries, Leaderboards } from './screens/leaderboards';
import { Economy } from './screens/economy';
import { Chat, ChannelMessages } from './screens/chat';
import { Tournaments } from './screens/tournaments';
import { Notifications } from './screens/notifications';
import { AuditLog } from './screens/audit';
import { GuestPurge } from './screens/guest-purge';
import { ExtensionScreen, type ConsoleScreen } from './screens/extension';
import { useLoad, type Loaded } from './load';

type Features = Data<'/api/v1/ops/features'>;

interface NavItem {
  to: string;
  label: string;
}

const NAV: NavItem[] = [
  { to: '/', label: 'Overview' },
  { to: '/players', label: 'Players' },
  { to: '/matches', label: 'Matches' },
  { to: '/matchmaker', label: 'Matchmaker' },
  { to: '/leaderboards', label: 'Leaderboards' },
  { to: '/economy', label: 'Economy' },
  { to: '/chat', label: 'Chat' },
  { to: '/tournaments', label: 'Tournaments' },
  { to: '/notifications', label: 'Notifications' },
  { to: '/audit', label: 'Audit log' },
  { to: '/guest-purge', label: 'Guest purge' },
];

export function App() {
  const [session, setSession] = useState<ConsoleSession | null | undefined>(undefined);
  const refresh = () => readSession().then(setSession, () => setSession(null));
  useEffect(() => {
    whenSignedOut(() => setSession(null));
    void refresh();
  }, []);
  if (session === undefined) return <p class="booting">Loading…</p>;
  if (session === null) return <SignIn onSignedIn={refresh} />;
  return <Shell session={session} onSignedOut={() => setSession(null)} />;
}

function Shell(props: { session: ConsoleSession; onSignedOut: () => void }) {
  const { path } = useLocation();
  const [menuOpen, setMenuOpen] = useState(false);
  // Read once for the whole app: the version banner here, the feature list on the overview.
  const features = useLoad('features', async () => (await api.get('/api/v1/ops/features')).data);
  // Screens declared by extensions' manifests join the navigation after the core ones.
  const screens = useLoad('screens', () => api.get('/api/v1/ops/console/screens'));
  const extensionScreens = screens.data?.data ?? [];
  const nav: NavItem[] = [...NAV, ...extensionScreens.map((e) => ({ to: screenPath(e), label: e.title }))];
  const signOut = async () => {
    await endSession().catch(() => {});
    navigate('/', { replace: true });
    props.onSignedOut();
  };
  useEffect(() => setMenuOpen(false), [path]);
  const active = (to: string) => (to === '/' ? path === '/' : path === to || path.startsWith(to + '/'));

  return (
    <div class="shell">
      <header class="topbar">
        <button type="button" class="menu-toggle" aria-expanded={menuOpen} aria-controls="nav" onClick={() => setMenuOpen(!menuOpen)}>
          Menu
        </button>
        <a {...href('/')} class="brand">
          svc <span>console</span>
        </a>
        <div class="who">
          <span data-testid="who">{props.session.display}</span>
          <span class="muted caps">{props.session.caps.join(' · ')}</span>
          <button type="button" onClick={signOut}>
            Sign out
          </button>
        </div>
      </header>
      <VersionBanner features={features.data} />
      <div class="body">
        <nav id="nav" class={menuOpen ? 'nav open' : 'nav'} aria-label="Screens">
          {nav.map((item) => (
            <a {...href(item.to)} class={active(item.to) ? 'active' : undefined} aria-current={active(item.to) ? 'page' : undefined}>
              {item.label}
            </a>
          ))}
        </nav>
        <main>{route(path, props.session, features, { list: extensionScreens, loading: screens.loading })}</main>
      </div>
    </div>
  );
}

function VersionBanner({ features }: { features: Features | null }) {
  if (!features || features.core.version === __CORE_VERSION__) return null;
  return (
    <p class="banner" role="alert" data-testid="version-banner">
      This console was built for {features.core.name} {__CORE_VERSION__}, but the server runs {features.core.version}. Some screens may not match what the server offers.
    </p>
  );
}

const screenPath = (s: ConsoleScreen) => `/ext/${encodeURIComponent(s.extension)}/${encodeURIComponent(s.id)}`;

function route(path: string, session: ConsoleSession, features: Loaded<Features>, screens: { list: ConsoleScreen[]; loading: boolean }) {
  let p: Record<string, string> | null;
  if (path === '/') return <Overview features={features} />;
  if (path === '/players') return <PlayerList />;
  if ((p = match('/players/:id', path))) return <PlayerPage id={p.id!} canErase={session.caps.includes('erasure')} />;
  if (path === '/matches') return <Matches />;
  if (path === '/matchmaker') return <Matchmaker />;
  if (path === '/leaderboards') return <Leaderboards />;
  if (path === '/leaderboards/board') return <BoardEntries />;
  if (path === '/economy' || path === '/economy/items' || path === '/economy/listings') return <Economy tab={path === '/economy/listings' ? 'listings' : 'items'} />;
  if (path === '/chat') return <Chat />;
  if (path === '/chat/channel') return <ChannelMessages />;
  if (path === '/tournaments') return <Tournaments />;
  if (path === '/notifications') return <Notifications />;
  if (path === '/audit') return <AuditLog />;
  if (path === '/guest-purge') return <GuestPurge canErase={session.caps.includes('erasure')} />;
  if ((p = match('/ext/:name/:id', path))) {
    const { name, id } = p;
    return <ExtensionScreen screen={screens.list.find((s) => s.extension === name && s.id === id) ?? null} loading={screens.loading} />;
  }
  return (
    <section class="screen">
      <h1>Not found</h1>
      <p>
        The console has no screen at this address. <a {...href('/')}>Back to the overview</a>.
      </p>
    </section>
  );
}
