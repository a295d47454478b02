// What a started service stops, and in which order: each part pushes a step
// as it starts; stop() runs them in reverse (the API closes before the
// workers, the workers before their connections, the database last).

export type Step = { name: string; stop: () => Promise<unknown> | void };

export type Stack = {
  push(step: Step): void;
  stop(): Promise<void>;
};

type Log = { error(obj: object, msg: string): void };

export function createStack(log: Log): Stack {
  const steps: Step[] = [];
  return {
    push: (step) => void steps.push(step),
    async stop() {
      for (const s of steps.splice(0).reverse()) await stopLogged(s, log);
    },
  };
}

/** Stops every step at once and waits for all of them (an error is logged, not thrown). */
export async function stopAll(steps: readonly Step[], log: Log): Promise<void> {
  await Promise.all(steps.map((s) => stopLogged(s, log)));
}

async function stopLogged(s: Step, log: Log): Promise<void> {
  try {
    await s.stop();
  } catch (err) {
    log.error({ err, component: s.name }, 'error while stopping');
  }
}
