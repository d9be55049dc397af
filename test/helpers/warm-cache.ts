/**
 * Builds the test cache (the migrated store, as an archive and a directory; the demo image; the blank engine image)
 * before tap starts any test file: `npm test` runs it once (scripts/test.mjs). Without it, on a
 * machine whose cache is cold, the first test files to start each built all three at once, the
 * demo image three times over. Quick when the cache is warm (the files are only read).
 */
import { blankImage } from './engine.js';
import { demoImage, storeTemplateDir } from './server.js';

await Promise.all([storeTemplateDir(), demoImage(), blankImage()]);
