/** The type of the `t` a tap subtest callback receives (tap's last `test` overload is `(cb)`). */
import type t from 'tap';

export type TapTest = Parameters<Parameters<typeof t.test>[0]>[0];
