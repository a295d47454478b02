// The operators' route tables, in the one order that keeps them safe: the
// dashboard page (public: it carries no data and asks for the token itself)
// is mounted before the admin table, whose bearer guard covers everything
// else under /admin. Mounted the other way round, the guard would answer
// 401 for the page; left out, the page would be unreachable. (Tested in
// test/unit/operator-routes.test.ts.)
import type { RouteTable } from '../core/http/route.js';
import { type AdminDeps, adminRoutes } from '../modules/admin/admin.routes.js';
import { dashboardRoutes } from '../modules/admin/dashboard.routes.js';

export function operatorRoutes(deps: AdminDeps): RouteTable[] {
  return [dashboardRoutes(), adminRoutes(deps)];
}
