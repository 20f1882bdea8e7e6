// `npm start`: build dist/ when a source is newer than it, then run the host.
import { runFresh } from './fresh-dist.mjs';

await runFresh('host.mjs');
