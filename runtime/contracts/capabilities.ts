/** The capability classes of the operator plane; every ops route and every extension action declares exactly one. */
export const CAPABILITIES = ['read', 'player_data', 'config', 'erasure'] as const;
export type Capability = (typeof CAPABILITIES)[number];
