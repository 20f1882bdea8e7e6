import { z } from 'zod';
import type { Ctx } from '../contracts/context';

/** An extension's operator screen, as the console lists it in its navigation. */
export const ConsoleScreen = z.object({
  extension: z.string().meta({ description: 'the extension that declares the screen' }),
  id: z.string(),
  title: z.string(),
  action: z.string().meta({ description: 'the extension’s GET action the screen shows (`/api/v1/ops/ext/<extension>/<action>`)' }),
  fields: z.array(z.string()).meta({ description: 'query parameters the console asks for before calling the action' }),
});
export type ConsoleScreen = z.output<typeof ConsoleScreen>;

/** Every screen the installed extensions declare, in the order of the `extensions` setting. */
export function consoleScreens(ctx: Pick<Ctx, 'extensions'>): ConsoleScreen[] {
  return (ctx.extensions?.list ?? []).flatMap((e) =>
    (e.console?.screens ?? []).map((s) => ({ extension: e.name, id: s.id, title: s.title, action: s.action, fields: s.fields ?? [] })),
  );
}
