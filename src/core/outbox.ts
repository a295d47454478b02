// The port between a domain that writes notification rows (outbox) and the
// module that delivers them. The composition root wires it; domains never
// import the notifications module.

/**
 * Hands committed notification rows to delivery. Best effort: a row it misses
 * (Redis down, crash right after the commit) is picked up by the relay pass.
 */
export type NotificationDispatch = (notificationIds: readonly string[]) => Promise<void>;
