/*
 * The sandbox program of the test bed's pods (hack/images/pause.py, docs/images.md#the-pause-image): the first
 * process of every pod's sandbox, holding its namespaces open. It waits for signals and nothing else: SIGTERM
 * or SIGINT ends it (exit 0); SIGCHLD makes it reap every exited child, since as PID 1 of a pod that shares its
 * process namespace it inherits the orphans. `-v` prints its version and exits.
 *
 * Written for this project; built static, so the image needs no other file.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#ifndef OMC_PAUSE_VERSION
#define OMC_PAUSE_VERSION "unknown"
#endif

static void reap_children(void)
{
	/* One SIGCHLD may stand for several exits: collect until none is left. */
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
}

int main(int argc, char **argv)
{
	sigset_t waited;
	int sig;

	if (argc == 2 && strcmp(argv[1], "-v") == 0) {
		printf("omc-pause %s\n", OMC_PAUSE_VERSION);
		return 0;
	}
	if (argc != 1) {
		fprintf(stderr, "usage: %s [-v]\n", argv[0]);
		return 2;
	}
	/* Blocked signals stay pending until sigwait takes them: none can arrive between two waits unseen. */
	sigemptyset(&waited);
	sigaddset(&waited, SIGTERM);
	sigaddset(&waited, SIGINT);
	sigaddset(&waited, SIGCHLD);
	if (sigprocmask(SIG_BLOCK, &waited, NULL) != 0) {
		perror("sigprocmask");
		return 1;
	}
	for (;;) {
		int err = sigwait(&waited, &sig);
		if (err != 0) {
			fprintf(stderr, "sigwait: %s\n", strerror(err));
			return 1;
		}
		if (sig == SIGCHLD)
			reap_children();
		else
			return 0;
	}
}
