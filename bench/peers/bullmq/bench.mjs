// bullmqbench measures BullMQ (taskforcesh/bullmq, Node.js) on a given Redis, printing one
// JSON line per run in the same shape as `jobs bench` and ../asynq, so they can be compared
// side by side in one run (bench/compare-peers).
//
//   node bench.mjs -mode process -n 20000 -c 10 -payload 100 -redis 127.0.0.1:6379
//
// It FLUSHDBs the given Redis first, as ../asynq does: point it at a throwaway redis-server.
// Installs its own node_modules (npm ci, from package-lock.json) when they are missing.
//
// What each mode does (as `jobs bench` does, see internal/bench in the project):
//   enqueue        one warm-up add, then N queue.add calls from C concurrent async loops;
//                  p50/p99/max are of each add call
//   enqueue-batch  one warm-up add, then N jobs by queue.addBulk of 1000 from C loops;
//                  p50/p99/max are of each addBulk call
//   process        N jobs pre-enqueued by addBulk (untimed), then a Worker of concurrency C
//                  with a no-op processor, timed from worker.run() until N 'completed' events
//                  (each emitted after the job's moveToCompleted reply, so "acked");
//                  p50/p99/max are of each processor start minus worker start
//   latency        idle worker of concurrency C, warm-up job, then one job at a time, 20 ms
//                  apart: queue.add call start to processor start
//   delay          worker waiting, N jobs added by addBulk of 1000 from C loops, each due
//                  uniformly 1-3 s ahead (whole ms: BullMQ's delay is in ms): processor start
//                  minus due time (the job's timestamp + delay, which is what BullMQ uses)
//   memory         warm-up add, then N jobs by addBulk of 1000 from C loops, left pending:
//                  Redis used_memory growth / N (the events stream, capped near 10,000
//                  entries by default, is part of it)
//
// Finished jobs are deleted at once: the Worker has removeOnComplete {count: 0} (a worker
// option, so nothing is added to each pending job's stored options), as jobs deletes done
// jobs at once in its bench. Everything else is BullMQ's default (ioredis without
// auto-pipelining, drainDelay 5 s, lock 30 s, events stream maxLen 10,000). BullMQ 6 takes
// its Redis driver as an optional peer dependency: ioredis 5.11.1 here, the version BullMQ
// 6.7.0 is developed against (its devDependencies).
//
// Delay: an idle worker blocks (BZPOPMIN) until the next delayed job is due, and Redis
// ends a timed-out blocking command only on its hz tick (10 a second by default), so
// lateness here is up to ~100 ms on a default redis-server; with `hz 100` it was ~15 ms.
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
if (!existsSync(join(here, 'node_modules', 'bullmq')) || !existsSync(join(here, 'node_modules', 'ioredis'))) {
  // stdout is the JSON line: npm's output goes to stderr.
  execFileSync('npm', ['ci', '--no-audit', '--no-fund', '--loglevel=error'], { cwd: here, stdio: ['ignore', 2, 2] });
}
const { Queue, Worker } = await import('bullmq');
const { default: IORedis } = await import('ioredis');

const BATCH = 1000;
const LATENCY_IDLE_MS = 20;
const STALL_MS = 30000;

function parseFlags(argv) {
  const o = { mode: 'process', n: 20000, c: 10, payload: 100, redis: '127.0.0.1:6379' };
  for (let i = 0; i < argv.length; i++) {
    let a = argv[i];
    if (!a.startsWith('-')) usage(`unexpected argument ${a}`);
    a = a.replace(/^--?/, '');
    let v;
    const eq = a.indexOf('=');
    if (eq >= 0) [a, v] = [a.slice(0, eq), a.slice(eq + 1)];
    else v = argv[++i];
    if (!(a in o)) usage(`unknown flag -${a}`);
    if (v === undefined) usage(`flag -${a} needs a value`);
    o[a] = typeof o[a] === 'number' ? Number(v) : v;
    if (Number.isNaN(o[a])) usage(`flag -${a}: ${v} is not a number`);
  }
  return o;
}

function usage(msg) {
  process.stderr.write(`${msg}\nusage: node bench.mjs -mode enqueue|enqueue-batch|process|latency|delay|memory -n N -c C -payload BYTES -redis host:port\n`);
  process.exit(2);
}

const now = () => performance.now(); // ms, monotonic
const wallMs = () => performance.timeOrigin + performance.now(); // ms since the epoch, sub-ms

// summary as jobs' internal/bench: nearest-rank percentiles, ms rounded to the µs.
function summary(out, n, elapsedMs, samples) {
  const r3 = (x) => Math.round(x * 1000) / 1000;
  out.jobs_per_s = elapsedMs > 0 ? Math.round((n / (elapsedMs / 1000)) * 10) / 10 : 0;
  const s = Float64Array.from(samples).sort();
  const pct = (p) => (s.length ? s[Math.min(Math.max(Math.ceil((p / 100) * s.length), 1), s.length) - 1] : 0);
  out.p50_ms = r3(pct(50));
  out.p99_ms = r3(pct(99));
  out.max_ms = s.length ? r3(s[s.length - 1]) : 0;
}

// parallel runs fn(i) for i in 0..tasks-1 on up to workers async loops.
async function parallel(workers, tasks, fn) {
  let next = 0;
  const loops = Array.from({ length: Math.max(1, Math.min(workers, tasks)) }, async () => {
    for (;;) {
      const i = next++;
      if (i >= tasks) return;
      await fn(i);
    }
  });
  await Promise.all(loops);
}

// addBatches adds n jobs by addBulk of BATCH from up to workers loops; job(i) builds one
// {name, data, opts}. Returns each addBulk call's duration in ms.
async function addBatches(queue, n, workers, job) {
  const batches = Math.ceil(n / BATCH);
  const took = new Array(batches);
  await parallel(workers, batches, async (k) => {
    const size = Math.min(BATCH, n - k * BATCH);
    const jobs = new Array(size);
    for (let i = 0; i < size; i++) jobs[i] = job(k * BATCH + i);
    const t0 = now();
    await queue.addBulk(jobs);
    took[k] = now() - t0;
  });
  return took;
}

async function usedMemory(rdb) {
  const info = await rdb.info('memory');
  const m = /^used_memory:(\d+)/m.exec(info);
  if (!m) throw new Error('INFO memory has no used_memory');
  return Number(m[1]);
}

// waitFor resolves when cond() holds, polling every 5 ms; it fails when progress() has not
// moved for STALL_MS.
async function waitFor(cond, progress) {
  let last = progress();
  let moved = now();
  while (!cond()) {
    await new Promise((r) => setTimeout(r, 5));
    const p = progress();
    if (p !== last) [last, moved] = [p, now()];
    else if (now() - moved > STALL_MS) throw new Error(`no job ran for ${STALL_MS} ms (${p} done)`);
  }
}

async function main() {
  const o = parseFlags(process.argv.slice(2));
  const modes = ['enqueue', 'enqueue-batch', 'process', 'latency', 'delay', 'memory'];
  if (!modes.includes(o.mode)) usage(`unknown mode ${o.mode}`);
  if (!(o.n > 0) || !(o.c > 0) || !(o.payload >= 0)) usage('-n and -c must be positive, -payload not negative');
  const [host, port] = o.redis.includes(':') ? o.redis.split(':') : [o.redis, '6379'];
  const connection = { host, port: Number(port), maxRetriesPerRequest: null };
  // This connection fails fast (a wrong -redis should not hang); BullMQ's own retry forever.
  const rdb = new IORedis({ host, port: Number(port), maxRetriesPerRequest: 1, retryStrategy: (t) => (t > 3 ? null : 200) });
  rdb.on('error', () => {});
  await rdb.flushdb();

  const name = 'bench';
  const data = { p: 'x'.repeat(o.payload) };
  const queue = new Queue(name, { connection });
  await queue.waitUntilReady();
  const workers = [];
  const newWorker = (processor, concurrency) => {
    const w = new Worker(name, processor, {
      connection,
      concurrency,
      autorun: false,
      removeOnComplete: { count: 0 },
    });
    w.on('error', (err) => process.stderr.write(`bullmq worker: ${err}\n`));
    workers.push(w);
    return w;
  };
  const out = { system: 'bullmq', mode: o.mode, n: o.n, c: o.c };

  switch (o.mode) {
    case 'enqueue': {
      await queue.add('t', data); // warm-up: connection and scripts loaded
      const took = new Array(o.n);
      const t0 = now();
      await parallel(o.c, o.n, async (i) => {
        const s = now();
        await queue.add('t', data);
        took[i] = now() - s;
      });
      summary(out, o.n, now() - t0, took);
      break;
    }
    case 'enqueue-batch':
    case 'memory': {
      await queue.add('t', data);
      const before = o.mode === 'memory' ? await usedMemory(rdb) : 0;
      const t0 = now();
      const took = await addBatches(queue, o.n, o.c, () => ({ name: 't', data }));
      summary(out, o.n, now() - t0, took);
      if (o.mode === 'memory') {
        out.bytes_per_job = Math.round(((await usedMemory(rdb)) - before) / o.n * 10) / 10;
      }
      break;
    }
    case 'process': {
      await addBatches(queue, o.n, Math.min(o.c, 16), () => ({ name: 't', data }));
      const starts = [];
      let t0 = 0;
      let done = 0;
      const w = newWorker(async () => {
        starts.push(now() - t0);
      }, o.c);
      w.on('completed', () => done++);
      await w.waitUntilReady();
      t0 = now();
      w.run().catch((err) => process.stderr.write(`bullmq worker run: ${err}\n`));
      await waitFor(() => done >= o.n, () => done);
      summary(out, o.n, now() - t0, starts.slice(0, o.n));
      break;
    }
    case 'latency': {
      const seen = new Map(); // job id -> processor start
      const w = newWorker(async (job) => {
        seen.set(job.id, now());
      }, o.c);
      await w.waitUntilReady();
      w.run().catch((err) => process.stderr.write(`bullmq worker run: ${err}\n`));
      const warm = await queue.add('t', data);
      await waitFor(() => seen.has(warm.id), () => seen.size);
      const took = [];
      for (let i = 0; i < o.n; i++) {
        await new Promise((r) => setTimeout(r, LATENCY_IDLE_MS));
        const t0 = now();
        const job = await queue.add('t', data);
        // The processor may start before add's reply is read (another connection).
        if (!seen.has(job.id)) {
          await new Promise((resolve, reject) => {
            const deadline = now() + STALL_MS;
            const poll = () => {
              if (seen.has(job.id)) resolve();
              else if (now() > deadline) reject(new Error(`job ${job.id} did not start within ${STALL_MS} ms`));
              else setImmediate(poll);
            };
            poll();
          });
        }
        took.push(seen.get(job.id) - t0);
      }
      summary(out, 0, 0, took);
      break;
    }
    case 'delay': {
      const late = [];
      let warmed = false;
      const w = newWorker(async (job) => {
        const at = wallMs();
        if (job.data.due === undefined) warmed = true;
        else late.push(at - job.data.due);
      }, o.c);
      await w.waitUntilReady();
      w.run().catch((err) => process.stderr.write(`bullmq worker run: ${err}\n`));
      await queue.add('t', data);
      await waitFor(() => warmed, () => 0);
      await addBatches(queue, o.n, o.c, () => {
        const timestamp = Date.now();
        const delay = 1000 + Math.floor(Math.random() * 2000);
        return { name: 't', data: { p: data.p, due: timestamp + delay }, opts: { delay, timestamp } };
      });
      await waitFor(() => late.length >= o.n, () => late.length);
      summary(out, 0, 0, late.slice(0, o.n));
      break;
    }
  }

  await Promise.all(workers.map((w) => w.close()));
  await queue.close();
  await rdb.quit();
  process.stdout.write(JSON.stringify(out) + '\n');
}

main().then(
  () => process.exit(0),
  (err) => {
    process.stderr.write(`bullmqbench: ${err && err.stack ? err.stack : err}\n`);
    process.exit(1);
  },
);
