// Every example of the README, run as written against the stack: each
// becomes a module of this package (so `@ratewire/client` resolves to it)
// and is imported while the test's bank publishes.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync, rmSync } from 'node:fs';
import { keepPublishing, publishing } from './env.js';

const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');
const examples = [...readme.matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1]);

test('the README has examples', () => assert.ok(examples.length >= 4));

examples.forEach((source, index) => {
  test(`README example ${index + 1} runs`, publishing, async () => {
    const file = new URL(`./.readme-${index + 1}.mjs`, import.meta.url);
    writeFileSync(file, source);
    const stop = keepPublishing();
    try {
      await import(file.href);
    } finally {
      stop();
      rmSync(file);
    }
  });
});
