/**
 * The deparser behind an indirection, so tests can substitute a faulty one and prove that the
 * verify pass (re-parse and re-check of the rewritten SQL) catches whatever it mis-prints.
 */
import { deparseSync } from 'pgsql-parser';

export const deparser = {
  deparse(node: object): string {
    return deparseSync(node as never, { pretty: false }) as string;
  },
};
