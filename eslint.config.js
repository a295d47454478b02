// Lint (npm run lint): typescript-eslint's recommended rules, plus the
// type-aware ones that catch what tests rarely do: a promise nobody awaits or
// catches (an unhandled rejection ends the process), and a promise passed
// where a plain callback is expected (its rejection goes nowhere).
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['src/generated/**', 'dist/**', 'node_modules/**', 'src/modules/admin/dashboard/**', 'scratch/**', 'test/scratch/**'] },
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts'],
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/await-thenable': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' }],
      '@typescript-eslint/consistent-type-imports': ['error', { fixStyle: 'inline-type-imports' }],
      'no-console': ['error', { allow: ['log', 'error'] }],
    },
  },
  {
    // Tests and benchmarks may print their results; the service logs through pino.
    files: ['src/**/*.ts'],
    rules: { 'no-console': 'error' },
  },
);
