/* threadpool.h -- the library's one pool of worker threads, shared by every multi-threaded call.
 * Created lazily on the first call that wants more than one thread, grown on demand, joined at
 * exit (a destructor) and forgotten in a fork()ed child. One job runs on it at a time; a call
 * that finds it busy (another application thread, or a nested call from inside a task) runs its
 * tasks on freshly created threads instead, so calls never wait on each other. */
#ifndef LOFP_THREADPOOL_H
#define LOFP_THREADPOOL_H

#include "core/core.h"

/* Upper bound on the threads of one job. */
#define LOFP_MAX_THREADS 64
/* Upper bound on the tasks of one job (callers never ask for more; extra ones would not run). */
#define LOFP_MAX_TASKS 256

/* Task i of a job of n: tasks must be independent; which thread runs which task is unspecified. */
typedef void (*lofp_task_fn)(void *arg, size_t i);

/* Runs fn(arg, i) for every i in [0, ntasks) (ntasks <= LOFP_MAX_TASKS) on up to nthreads
 * threads, the calling thread taking part, and returns when all have finished. Tasks are claimed
 * one at a time by whichever thread is free, so a worker that starts late takes fewer (the caller
 * never waits for a worker that has not begun a task); split work into a few tasks per thread
 * (lofp_parallel_tasks) so that the threads can even out. nthreads <= 1 runs inline. If a thread
 * cannot be created the remaining tasks run on the threads that exist: the job always
 * completes. */
LOFP_INTERNAL void lofp_parallel_run_tasks(size_t ntasks, size_t nthreads, lofp_task_fn fn, void *arg);

/* lofp_parallel_run_tasks(n, n, fn, arg): one task per thread. */
LOFP_INTERNAL void lofp_parallel_run(size_t n, lofp_task_fn fn, void *arg);

/* How many tasks to cut `units` indivisible units into for `threads` threads: threads times
 * lofp_parallel_split, at most units and LOFP_MAX_TASKS, at least threads (1 for one thread). */
LOFP_INTERNAL size_t lofp_parallel_tasks(size_t threads, size_t units);

/* How many threads to use for `elems` elements of work in `units` indivisible units (rows) when
 * the caller asked for `want`: at most want, units and LOFP_MAX_THREADS, and no more than one
 * per lofp_parallel_min_elems elements (below that the hand-off costs more than it saves). */
LOFP_INTERNAL size_t lofp_parallel_threads(unsigned want, size_t units, size_t elems);

/* Work (elements) per extra thread below which a call stays single-threaded; tests set it to 1
 * so that tiny shapes are split too. */
LOFP_INTERNAL extern size_t lofp_parallel_min_elems;

/* 0 (default): the persistent pool; 1: create and join threads on every call (kept to measure
 * the pool against, see BENCHMARKS.md). */
LOFP_INTERNAL extern int lofp_parallel_fork_join;

/* Pool tuning, exposed for the idle-gap benchmark (`lofp bench pool`) and the tests:
 * spin_us: how long a worker spins for the next job before sleeping (default 200; 0 = sleep at
 * once); migrate: each worker keeps its affinity off the CPU the current caller runs on
 * (default 1; Linux; 0 gives a kept-off worker its full mask back at its next job);
 * split: tasks per thread of lofp_parallel_tasks (default 4; 1 = one static share each). */
LOFP_INTERNAL extern unsigned lofp_parallel_spin_us;
LOFP_INTERNAL extern int lofp_parallel_migrate;
LOFP_INTERNAL extern unsigned lofp_parallel_split;

#endif
