/* threadpool.c -- a persistent pthread pool (see threadpool.h). Workers sleep on a condition
 * variable between jobs; a job is published by bumping a generation counter, and tasks are
 * handed out one index at a time under the mutex (jobs have at most LOFP_MAX_THREADS tasks, so
 * the lock is taken a handful of times per call). */
#include <pthread.h>

#include "threadpool.h"

size_t lofp_parallel_min_elems = 32768;
int lofp_parallel_fork_join = 0;

static struct {
    pthread_mutex_t mu;
    pthread_cond_t work_cv, done_cv;
    pthread_t th[LOFP_MAX_THREADS];
    unsigned nthreads; /* workers started */
    unsigned long gen; /* bumped once per job */
    lofp_task_fn fn;
    void *arg;
    size_t ntasks, next, pending;
    int quit;
} P = { .mu = PTHREAD_MUTEX_INITIALIZER, .work_cv = PTHREAD_COND_INITIALIZER,
        .done_cv = PTHREAD_COND_INITIALIZER };

/* Held by the one caller whose job owns the pool. */
static pthread_mutex_t busy = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

/* Runs tasks of the current job until none is left; called and returns with P.mu held. */
static void drain_locked(void)
{
    while (P.next < P.ntasks) {
        size_t i = P.next++;
        lofp_task_fn fn = P.fn;
        void *arg = P.arg;
        pthread_mutex_unlock(&P.mu);
        fn(arg, i);
        pthread_mutex_lock(&P.mu);
        if (--P.pending == 0) pthread_cond_signal(&P.done_cv);
    }
}

static void *worker(void *unused)
{
    (void)unused;
    pthread_mutex_lock(&P.mu);
    unsigned long seen = P.gen;
    for (;;) {
        while (!P.quit && P.gen == seen) pthread_cond_wait(&P.work_cv, &P.mu);
        if (P.quit) break;
        seen = P.gen;
        drain_locked();
    }
    pthread_mutex_unlock(&P.mu);
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
    P.ntasks = P.next = P.pending = 0;
    P.quit = 0;
}

static void register_atfork(void) { pthread_atfork(NULL, NULL, atfork_child); }

__attribute__((destructor)) static void pool_shutdown(void)
{
    pthread_mutex_lock(&P.mu);
    unsigned n = P.nthreads;
    P.quit = 1;
    pthread_cond_broadcast(&P.work_cv);
    pthread_mutex_unlock(&P.mu);
    for (unsigned i = 0; i < n; i++) pthread_join(P.th[i], NULL);
    pthread_mutex_lock(&P.mu);
    P.nthreads = 0;
    P.quit = 0;
    pthread_mutex_unlock(&P.mu);
}

typedef struct {
    lofp_task_fn fn;
    void *arg;
    size_t i;
} oneshot;

static void *oneshot_main(void *v)
{
    oneshot *o = v;
    o->fn(o->arg, o->i);
    return NULL;
}

/* Fresh threads for this job only (pool busy, or fork/join requested). */
static void run_fork_join(size_t n, lofp_task_fn fn, void *arg)
{
    pthread_t th[LOFP_MAX_THREADS];
    oneshot jobs[LOFP_MAX_THREADS];
    int started[LOFP_MAX_THREADS];
    for (size_t i = 1; i < n; i++) {
        jobs[i] = (oneshot){ fn, arg, i };
        started[i] = pthread_create(&th[i], NULL, oneshot_main, &jobs[i]) == 0;
    }
    fn(arg, 0);
    for (size_t i = 1; i < n; i++) {
        if (started[i]) pthread_join(th[i], NULL);
        else fn(arg, i);
    }
}

void lofp_parallel_run(size_t n, lofp_task_fn fn, void *arg)
{
    if (n > LOFP_MAX_THREADS) n = LOFP_MAX_THREADS;
    if (n <= 1) { fn(arg, 0); return; }
    if (lofp_parallel_fork_join || pthread_mutex_trylock(&busy) != 0) {
        run_fork_join(n, fn, arg);
        return;
    }
    pthread_once(&atfork_once, register_atfork);
    pthread_mutex_lock(&P.mu);
    while (P.nthreads < n - 1) {
        if (pthread_create(&P.th[P.nthreads], NULL, worker, NULL) != 0) break;
        P.nthreads++;
    }
    P.fn = fn;
    P.arg = arg;
    P.ntasks = n;
    P.next = 0;
    P.pending = n;
    P.gen++;
    pthread_cond_broadcast(&P.work_cv);
    drain_locked();
    while (P.pending) pthread_cond_wait(&P.done_cv, &P.mu);
    P.fn = NULL;
    P.arg = NULL;
    pthread_mutex_unlock(&P.mu);
    pthread_mutex_unlock(&busy);
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
