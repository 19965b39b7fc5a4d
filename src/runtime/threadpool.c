/* threadpool.c -- a persistent pthread pool (see threadpool.h and docs/RUNTIME.md).
 *
 * A job is published as one 64-bit ticket, (job id << 32) | (tasks << 16) | next task index; every thread that
 * takes part (the caller first, then any worker that arrives) claims task indices by CAS on the
 * ticket, so a worker that wakes late simply finds fewer tasks (or none) left and the caller
 * never waits for a worker that has not started one. Workers spin a short while after a job
 * (back-to-back calls find them awake), then sleep on a condition variable.
 *
 * Every worker is kept off the CPU the caller of the current job runs on (Linux): the scheduler
 * of a small VM packs runnable threads onto as few vCPUs as it can -- it places a woken worker on
 * the waker's CPU, where it preempts the caller, and pulls a worker that merely moved off once
 * back onto it -- so the two halves of a call ran one after the other. The caller therefore sets
 * each worker's affinity to "the CPUs the pool started with, minus mine" before it wakes them
 * (one sched_setaffinity per worker, and only when the caller's CPU changed since the last job),
 * so the wake-up itself lands on another CPU; a worker whose thread id was not known yet does
 * the same for itself when it picks the job up. The scheduler may also move the caller onto a
 * worker's CPU during a long call: the caller republishes its CPU before each task it claims, and
 * each worker re-checks before each of its tasks. */
#if defined(__linux__)
#define _GNU_SOURCE 1
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "threadpool.h"

size_t lofp_parallel_min_elems = 32768;
int lofp_parallel_fork_join = 0;
unsigned lofp_parallel_spin_us = 200;
int lofp_parallel_migrate = 1;
unsigned lofp_parallel_split = 4;

/* ticket = (job id << ID_SHIFT) | (tasks << 16) | next task: a thread learns everything it needs to
 * claim a task from one atomic load, never from fields the next job may be rewriting */
#define ID_SHIFT 32u
#define TASK_MASK 0xFFFFu

static struct {
    pthread_mutex_t mu;
    pthread_cond_t work_cv, done_cv;
    pthread_t th[LOFP_MAX_THREADS];
    unsigned nthreads;             /* workers started */
    _Atomic uint64_t ticket;       /* (job id << 32) | (tasks << 16) | next task */
    _Atomic size_t done;           /* tasks of the current job finished */
    _Atomic unsigned sleepers;     /* workers inside (or about to enter) cond_wait */
    _Atomic int caller_waiting;    /* the caller sleeps on done_cv */
    _Atomic int quit;
    /* the current job: written by the caller before the ticket names it, stable until done */
    lofp_task_fn fn;
    void *arg;
    _Atomic unsigned helpers;      /* workers 0..helpers-1 take part (read racily by design: a
                                      worker that reads the next job's value only helps or not) */
    _Atomic int caller_cpu;        /* -1: unknown */
#if defined(__linux__)
    /* keeping workers off the caller's CPU: the mask every worker started with (the creating
     * caller's), each worker's thread id (0 until it has started) and the CPU it is kept off
     * (-1: none; written by the caller of a job, or by the worker itself before its tid is out) */
    cpu_set_t allowed;
    int have_allowed;
    _Atomic int tid[LOFP_MAX_THREADS];
    _Atomic int excluded[LOFP_MAX_THREADS];
#endif
} P = { .mu = PTHREAD_MUTEX_INITIALIZER, .work_cv = PTHREAD_COND_INITIALIZER,
        .done_cv = PTHREAD_COND_INITIALIZER };

/* Held by the one caller whose job owns the pool. */
static pthread_mutex_t busy = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static inline uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static inline int current_cpu(void)
{
#if defined(__linux__)
    return sched_getcpu();
#else
    return -1;
#endif
}

#if defined(__linux__)
/* Keeps worker w (thread id tid: 0 = the calling thread) off CPU `caller`: one
 * sched_setaffinity when the CPU it is kept off differs (it also migrates the worker at once if
 * it runs there), nothing otherwise. want == 0 (lofp_parallel_migrate off), an unknown caller
 * CPU or a one-CPU mask give the worker the full mask back. A failing call leaves it as it is. */
static void keep_off(unsigned w, int tid, int caller, int want)
{
    if (!P.have_allowed) return;
    int ex = atomic_load_explicit(&P.excluded[w], memory_order_relaxed);
    if (!want || caller < 0 || !CPU_ISSET(caller, &P.allowed) || CPU_COUNT(&P.allowed) < 2) {
        if (ex >= 0 && sched_setaffinity(tid, sizeof P.allowed, &P.allowed) == 0)
            atomic_store_explicit(&P.excluded[w], -1, memory_order_relaxed);
        return;
    }
    if (caller == ex) return;
    cpu_set_t other = P.allowed;
    CPU_CLR(caller, &other);
    if (sched_setaffinity(tid, sizeof other, &other) == 0)
        atomic_store_explicit(&P.excluded[w], caller, memory_order_relaxed);
}
#endif

/* Claims and runs tasks of job `id` until none is left; self is the worker's index, or -1 for
 * the caller. Before each task the caller republishes its CPU if it moved and a worker re-checks
 * that it is kept off that CPU (one load and a compare when nothing moved): the scheduler may
 * move the caller onto a worker's CPU in the middle of a long call. */
static void run_tasks(uint64_t id, int self)
{
    uint64_t t = atomic_load_explicit(&P.ticket, memory_order_acquire);
    for (;;) {
        if ((t >> ID_SHIFT) != id) return;
        size_t i = (size_t)(t & TASK_MASK), n = (size_t)((t >> 16) & TASK_MASK);
        if (i >= n) return;
        if (!atomic_compare_exchange_weak_explicit(&P.ticket, &t, t + 1, memory_order_acq_rel,
                                                   memory_order_acquire))
            continue;
#if defined(__linux__)
        if (lofp_parallel_migrate) {
            int c = atomic_load_explicit(&P.caller_cpu, memory_order_relaxed);
            if (self < 0) {
                int now = current_cpu();
                if (now != c) atomic_store_explicit(&P.caller_cpu, now, memory_order_relaxed);
            } else {
                keep_off((unsigned)self, 0, c, 1);
            }
        }
#else
        (void)self;
#endif
        /* the job's fields are stable while one of its tasks is unfinished */
        P.fn(P.arg, i);
        /* seq_cst: with the load of caller_waiting below, a store-buffering pair against the
         * caller's store of caller_waiting and its load of done (no lost wake-up) */
        size_t d = atomic_fetch_add_explicit(&P.done, 1, memory_order_seq_cst) + 1;
        if (d == n) {
            if (atomic_load_explicit(&P.caller_waiting, memory_order_seq_cst)) {
                pthread_mutex_lock(&P.mu);
                pthread_cond_signal(&P.done_cv);
                pthread_mutex_unlock(&P.mu);
            }
            return;
        }
        t = atomic_load_explicit(&P.ticket, memory_order_acquire);
    }
}

static void *worker(void *varg)
{
    unsigned self = (unsigned)(uintptr_t)varg;
#if defined(__linux__)
    atomic_store_explicit(&P.tid[self], (int)syscall(SYS_gettid), memory_order_release);
#endif
    uint64_t seen = atomic_load_explicit(&P.ticket, memory_order_acquire) >> ID_SHIFT;
    for (;;) {
        /* spin a while for the next job, then sleep */
        uint64_t id = atomic_load_explicit(&P.ticket, memory_order_acquire) >> ID_SHIFT;
        if (id == seen && lofp_parallel_spin_us) {
            uint64_t end = now_ns() + (uint64_t)lofp_parallel_spin_us * 1000u;
            unsigned n = 0;
            while ((id = atomic_load_explicit(&P.ticket, memory_order_acquire) >> ID_SHIFT) == seen &&
                   !atomic_load_explicit(&P.quit, memory_order_relaxed)) {
                cpu_relax();
                if ((++n & 63) == 0 && now_ns() > end) break;
            }
        }
        if (id == seen) {
            pthread_mutex_lock(&P.mu);
            atomic_fetch_add_explicit(&P.sleepers, 1, memory_order_seq_cst);
            while (!atomic_load_explicit(&P.quit, memory_order_seq_cst) &&
                   (id = atomic_load_explicit(&P.ticket, memory_order_seq_cst) >> ID_SHIFT) == seen) {
                pthread_cond_wait(&P.work_cv, &P.mu);
            }
            atomic_fetch_sub_explicit(&P.sleepers, 1, memory_order_seq_cst);
            pthread_mutex_unlock(&P.mu);
        }
        if (atomic_load_explicit(&P.quit, memory_order_acquire)) break;
        seen = id;
        if (self >= atomic_load_explicit(&P.helpers, memory_order_relaxed)) continue; /* fewer threads asked */
#if defined(__linux__)
        /* normally the caller did this before the wake-up; this covers a job published before
         * this thread's id was out (the check is one load when nothing changed) */
        keep_off(self, 0, atomic_load_explicit(&P.caller_cpu, memory_order_relaxed), lofp_parallel_migrate);
#endif
        run_tasks(id, (int)self);
    }
    return NULL;
}

/* The child of a fork() has none of the parent's threads: start from an empty pool. */
static void atfork_child(void)
{
    pthread_mutex_init(&P.mu, NULL);
    pthread_cond_init(&P.work_cv, NULL);
    pthread_cond_init(&P.done_cv, NULL);
    pthread_mutex_init(&busy, NULL);
    P.nthreads = 0;
#if defined(__linux__)
    P.have_allowed = 0;
#endif
    atomic_store(&P.sleepers, 0);
    atomic_store(&P.caller_waiting, 0);
    atomic_store(&P.quit, 0);
}

static void register_atfork(void) { pthread_atfork(NULL, NULL, atfork_child); }

__attribute__((destructor)) static void pool_shutdown(void)
{
    pthread_mutex_lock(&P.mu);
    unsigned n = P.nthreads;
    atomic_store(&P.quit, 1);
    pthread_cond_broadcast(&P.work_cv);
    pthread_mutex_unlock(&P.mu);
    for (unsigned i = 0; i < n; i++) pthread_join(P.th[i], NULL);
    pthread_mutex_lock(&P.mu);
    P.nthreads = 0;
    atomic_store(&P.quit, 0);
    pthread_mutex_unlock(&P.mu);
}

typedef struct {
    lofp_task_fn fn;
    void *arg;
    size_t first, step, n;
} oneshot;

static void *oneshot_main(void *v)
{
    oneshot *o = v;
    for (size_t i = o->first; i < o->n; i += o->step) o->fn(o->arg, i);
    return NULL;
}

/* Fresh threads for this job only (pool busy, or fork/join requested): thread w runs tasks
 * w, w + nthreads, ... */
static void run_fork_join(size_t ntasks, size_t nthreads, lofp_task_fn fn, void *arg)
{
    pthread_t th[LOFP_MAX_THREADS];
    oneshot jobs[LOFP_MAX_THREADS];
    int started[LOFP_MAX_THREADS];
    for (size_t w = 1; w < nthreads; w++) {
        jobs[w] = (oneshot){ fn, arg, w, nthreads, ntasks };
        started[w] = pthread_create(&th[w], NULL, oneshot_main, &jobs[w]) == 0;
    }
    for (size_t i = 0; i < ntasks; i += nthreads) fn(arg, i);
    for (size_t w = 1; w < nthreads; w++) {
        if (started[w]) pthread_join(th[w], NULL);
        else oneshot_main(&jobs[w]);
    }
}

void lofp_parallel_run_tasks(size_t ntasks, size_t nthreads, lofp_task_fn fn, void *arg)
{
    if (ntasks == 0) return;
    if (ntasks > LOFP_MAX_TASKS) ntasks = LOFP_MAX_TASKS; /* callers never ask for more */
    if (nthreads > LOFP_MAX_THREADS) nthreads = LOFP_MAX_THREADS;
    if (nthreads > ntasks) nthreads = ntasks;
    if (nthreads <= 1) {
        for (size_t i = 0; i < ntasks; i++) fn(arg, i);
        return;
    }
    if (lofp_parallel_fork_join || pthread_mutex_trylock(&busy) != 0) {
        run_fork_join(ntasks, nthreads, fn, arg);
        return;
    }
    pthread_once(&atfork_once, register_atfork);
    pthread_mutex_lock(&P.mu);
#if defined(__linux__)
    if (P.nthreads == 0) /* the mask the workers inherit from this thread */
        P.have_allowed = sched_getaffinity(0, sizeof P.allowed, &P.allowed) == 0;
#endif
    while (P.nthreads < nthreads - 1) {
#if defined(__linux__)
        atomic_store_explicit(&P.tid[P.nthreads], 0, memory_order_relaxed);
        atomic_store_explicit(&P.excluded[P.nthreads], -1, memory_order_relaxed);
#endif
        if (pthread_create(&P.th[P.nthreads], NULL, worker, (void *)(uintptr_t)P.nthreads) != 0) break;
        P.nthreads++;
    }
    pthread_mutex_unlock(&P.mu);

    /* publish: the job's fields first, then the ticket that names it */
    P.fn = fn;
    P.arg = arg;
    atomic_store_explicit(&P.helpers, (unsigned)(nthreads - 1), memory_order_relaxed);
    const int cpu = current_cpu();
    atomic_store_explicit(&P.caller_cpu, cpu, memory_order_relaxed);
#if defined(__linux__)
    /* before the wake-up, so that it lands on another CPU (see the top of the file) */
    for (unsigned w = 0; w + 1 < nthreads; w++) {
        int tid = atomic_load_explicit(&P.tid[w], memory_order_acquire);
        if (tid > 0) keep_off(w, tid, cpu, lofp_parallel_migrate);
    }
#endif
    atomic_store_explicit(&P.done, 0, memory_order_relaxed);
    uint64_t id = (atomic_load_explicit(&P.ticket, memory_order_relaxed) >> ID_SHIFT) + 1;
    atomic_store_explicit(&P.ticket, id << ID_SHIFT | (uint64_t)ntasks << 16, memory_order_seq_cst);
    if (atomic_load_explicit(&P.sleepers, memory_order_seq_cst)) {
        pthread_mutex_lock(&P.mu);
        pthread_cond_broadcast(&P.work_cv);
        pthread_mutex_unlock(&P.mu);
    }
    run_tasks(id, -1);
    /* wait for the tasks the workers claimed: spin briefly, then sleep */
    if (atomic_load_explicit(&P.done, memory_order_acquire) != ntasks) {
        uint64_t end = now_ns() + 50000u;
        unsigned n = 0;
        while (atomic_load_explicit(&P.done, memory_order_acquire) != ntasks) {
            cpu_relax();
            if ((++n & 63) == 0 && now_ns() > end) break;
        }
        if (atomic_load_explicit(&P.done, memory_order_acquire) != ntasks) {
            pthread_mutex_lock(&P.mu);
            atomic_store_explicit(&P.caller_waiting, 1, memory_order_seq_cst);
            while (atomic_load_explicit(&P.done, memory_order_seq_cst) != ntasks)
                pthread_cond_wait(&P.done_cv, &P.mu);
            atomic_store_explicit(&P.caller_waiting, 0, memory_order_relaxed);
            pthread_mutex_unlock(&P.mu);
        }
    }
    pthread_mutex_unlock(&busy);
}

void lofp_parallel_run(size_t n, lofp_task_fn fn, void *arg)
{
    lofp_parallel_run_tasks(n, n, fn, arg);
}

size_t lofp_parallel_threads(unsigned want, size_t units, size_t elems)
{
    size_t t = want > 1 ? want : 1;
    if (t > LOFP_MAX_THREADS) t = LOFP_MAX_THREADS;
    if (t > units) t = units;
    size_t min = lofp_parallel_min_elems ? lofp_parallel_min_elems : 1;
    size_t by_work = elems / min;
    if (t > by_work) t = by_work ? by_work : 1;
    return t;
}

size_t lofp_parallel_tasks(size_t threads, size_t units)
{
    if (threads <= 1) return 1;
    size_t split = lofp_parallel_split ? lofp_parallel_split : 1;
    size_t t = threads * split;
    if (t > LOFP_MAX_TASKS) t = LOFP_MAX_TASKS;
    if (t > units) t = units;
    return t < threads ? threads : t;
}
