// `npm run ops`: build dist/ when a source is newer than it, then run the operator command line.
import { runFresh } from '../fresh-dist.mjs';

await runFresh('ops.mjs');
