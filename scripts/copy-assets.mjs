// Copies what the compiled service reads from beside its own modules (the
// dashboard's static page, script and style) from src/ to dist/.
import { cpSync } from 'node:fs';

cpSync('src/modules/admin/dashboard', 'dist/modules/admin/dashboard', { recursive: true });
