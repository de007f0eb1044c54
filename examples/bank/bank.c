/*
 * bank: worker threads move money between accounts; the total should never change.
 * It does: transfer() reads and writes balances without a lock, so two threads that
 * touch the same account lose each other's updates.
 *
 * Twenty offline breakpoints mark the run. With capture.toml (max_level 2, classes 1-3,
 * ids 1-10) the ten with ids 1-10 capture, once each; ids 11-20 are filtered out inside
 * the program (too deep, another class, or another id) and cost no system call.
 *
 *   usage: bank [THREADS] [TRANSFERS_PER_ROUND]
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sdt.h>

#define ACCOUNTS 8
#define ROUNDS 4
#define START_BALANCE 10000

long balance[ACCOUNTS];
long total_expected;
char bank_name[32] = "Example Savings";
const char *phase = "setup";
int nthreads = 4;
long transfers_per_round = 200000;

struct worker {
	pthread_t thread;
	int index;
	unsigned seed;
	long transfers;
};

static void transfer(int from, int to, long amount)
{
	SetBreakpoint(3, 2, 12, 1, "phase=check"); /* level 3: filtered */
	if (balance[from] < amount)
		return;
	/* The bug: read-modify-write of shared balances without a lock. */
	long from_balance = balance[from];
	long to_balance = balance[to];
	balance[from] = from_balance - amount;
	balance[to] = to_balance + amount;
}

static void *work(void *arg)
{
	struct worker *w = arg;
	char attrs[64];

	SetBreakpoint(2, 4, 13, 1, "phase=debug"); /* class 4: filtered */
	for (int round = 0; round < ROUNDS; round++) {
		snprintf(attrs, sizeof(attrs), "phase=transfer,round=%d", round);
		/* The first thread to start each round captures it (ids 3-6). */
		SetBreakpoint(2, 2, 3 + round, 0, attrs);
		for (long i = 0; i < transfers_per_round; i++) {
			int from = rand_r(&w->seed) % ACCOUNTS;
			int to = (from + 1 + rand_r(&w->seed) % (ACCOUNTS - 1)) % ACCOUNTS;
			SetBreakpoint(3, 2, 11, 1, "phase=transfer"); /* level 3: filtered */
			transfer(from, to, 1 + rand_r(&w->seed) % 100);
			w->transfers++;
			if (round == ROUNDS / 2 && i == transfers_per_round / 2)
				SetBreakpoint(1, 2, 7, 0, "phase=midway");
		}
		SetBreakpoint(2, 2, 16, 0, "phase=round-end"); /* id 16: filtered */
	}
	SetBreakpoint(2, 2, 8, 0, "phase=worker-done");
	SetBreakpoint(3, 3, 17, 0, "phase=worker-exit"); /* level 3: filtered */
	return NULL;
}

static long total(void)
{
	long sum = 0;
	for (int i = 0; i < ACCOUNTS; i++)
		sum += balance[i];
	return sum;
}

int main(int argc, char **argv)
{
	if (argc > 1)
		nthreads = atoi(argv[1]);
	if (argc > 2)
		transfers_per_round = atol(argv[2]);
	if (nthreads < 1 || nthreads > 64 || transfers_per_round < 1) {
		fprintf(stderr, "usage: bank [THREADS 1-64] [TRANSFERS_PER_ROUND]\n");
		return 2;
	}

	for (int i = 0; i < ACCOUNTS; i++)
		balance[i] = START_BALANCE;
	total_expected = total();
	SetBreakpoint(1, 1, 1, 0, "phase=setup");
	SetBreakpoint(1, 1, 15, 0, "phase=setup-detail"); /* id 15: filtered */
	SetBreakpoint(4, 1, 19, 0, "phase=setup"); /* level 4: filtered */

	struct worker *workers = calloc(nthreads, sizeof(*workers));
	phase = "transfer";
	for (int i = 0; i < nthreads; i++) {
		workers[i].index = i;
		workers[i].seed = 1234 + i;
		pthread_create(&workers[i].thread, NULL, work, &workers[i]);
	}
	char attrs[64];
	snprintf(attrs, sizeof(attrs), "phase=started,threads=%d", nthreads);
	SetBreakpoint(2, 1, 2, 0, attrs);
	SetBreakpoint(1, 4, 14, 0, "phase=started"); /* class 4: filtered */

	long transfers = 0;
	for (int i = 0; i < nthreads; i++) {
		pthread_join(workers[i].thread, NULL);
		transfers += workers[i].transfers;
	}
	phase = "audit";
	SetBreakpoint(1, 3, 9, 0, "phase=audit");
	SetBreakpoint(2, 3, 18, 0, "phase=audit-detail"); /* id 18: filtered */

	long sum = total();
	int lost = sum != total_expected;
	SetBreakpoint(1, 3, 10, 0, lost ? "phase=report,result=lost" : "phase=report,result=ok");
	SetBreakpoint(1, 5, 20, 0, "phase=report"); /* class 5: filtered */

	printf("%s: %d threads, %ld transfers\n", bank_name, nthreads, transfers);
	printf("total %ld, expected %ld: %s\n", sum, total_expected,
	       lost ? "MONEY CHANGED (race in transfer)" : "ok");
	free(workers);
	return lost ? 1 : 0;
}
