// The boundaries of STYLE.md, checked on every `npm run lint`: no import
// cycles; a domain module never imports another; core/ and config.ts never
// import a module or the composition; the delay-queue engine (src/queue/)
// imports nothing of the service; modules and core reach the engine only
// through src/queue/index.ts.
module.exports = {
  forbidden: [
    { name: 'no-cycles', severity: 'error', from: { path: '^src' }, to: { circular: true } },
    {
      name: 'modules-never-import-siblings',
      severity: 'error',
      from: { path: '^src/modules/([^/]+)/' },
      to: { path: '^src/modules/([^/]+)/', pathNot: '^src/modules/$1/' },
    },
    {
      name: 'core-never-imports-modules',
      severity: 'error',
      from: { path: '^src/(core/|config\\.ts$)' },
      to: { path: '^src/(modules|composition)/' },
    },
    // A command-line tool shares through core/ or the composition, never through another tool.
    { name: 'cli-never-imports-cli', severity: 'error', from: { path: '^src/cli/' }, to: { path: '^src/cli/' } },
    {
      name: 'engine-is-a-leaf',
      severity: 'error',
      from: { path: '^src/queue/' },
      to: { path: '^src/', pathNot: '^src/queue/' },
    },
    {
      name: 'engine-only-through-its-index',
      severity: 'error',
      from: { path: '^src/(modules|core|composition|cli)/|^src/[^/]+\\.ts$' },
      to: { path: '^src/queue/', pathNot: '^src/queue/index\\.ts$' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '^src/generated/' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
  },
};
