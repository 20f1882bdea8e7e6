/**
 * A change made for a caller that may stop waiting (a game script past its
 * deadline) commits only while the caller still waits: the service runs the
 * guard last inside its transaction, and the guard throws `CommitAbandoned`
 * to roll the change back. Every service a script binding reaches takes one.
 */
export interface CommitGuard {
  beforeCommit?: () => void;
}

/** The caller gave up waiting before the change committed: nothing was changed. */
export class CommitAbandoned extends Error {
  constructor() {
    super('the caller stopped waiting; the change was rolled back');
    this.name = 'CommitAbandoned';
  }
}

/** The guard of a script binding: `claim` is true while the script still waits (its worker's claim cell). */
export function guardOf(claim: () => boolean): CommitGuard {
  return {
    beforeCommit: () => {
      if (!claim()) throw new CommitAbandoned();
    },
  };
}
