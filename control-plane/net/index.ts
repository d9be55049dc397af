export * from './ssrf.js';
