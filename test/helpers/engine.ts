/**
 * Embedded engines on an empty database for tests that need one to run statements on. Each
 * starts on one shared blank image (copy on write, as the demo engines do) instead of running
 * initdb, which costs about five seconds of CPU per engine: two dozen of them were a minute of the
 * suite. Tests of initdb, dumps or data directories themselves start their engines as before.
 */
import { EmbeddedPostgres, IMAGE_INITDB } from '../../control-plane/embedded/index.js';
import { unpackImage, type DataImage } from '../../control-plane/embedded/image-fs.js';
import { cached } from './server.js';

let image: Promise<DataImage> | undefined;

/** the blank database as an image (built once, kept in the test cache) */
export function blankImage(): Promise<DataImage> {
  image ??= cached(`blank-${IMAGE_INITDB.join('')}.tar.gz`, async () => {
    const engine = await EmbeddedPostgres.start({ initdb: IMAGE_INITDB });
    try {
      return await engine.dump();
    } finally {
      await engine.close();
    }
  }).then(unpackImage);
  return image;
}

/** a new engine on an empty database of its own (what it writes stays in its memory) */
export async function blankEngine(): Promise<EmbeddedPostgres> {
  return EmbeddedPostgres.start({ image: await blankImage() });
}
