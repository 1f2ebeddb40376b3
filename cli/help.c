/* help.c -- the help texts (each command's --help, `lockctl help`) and the
 * exit-status table that ends each of them.  The table is repeated in
 * lockctl.1: change both. */
#include "cli/help.h"
#include "cli/ctl.h"

#include <stdio.h>

const char help_exit[] =
    "Exit status:\n"
    "  0      success; for run: the command exited 0\n"
    "  1      status: nobody holds the lock\n"
    "  64     usage error: unknown option, missing argument, malformed number\n"
    "  65     the gateway refused the request: invalid name, field or token, lock\n"
    "         not held or held by another token, feature not offered (4xx, 501)\n"
    "  69     the gateway could not be reached, or answered with a server error (5xx)\n"
    "  70     internal error (out of memory, cannot fork, unreadable answer)\n"
    "  75     busy: the lock is held by someone else and --wait was 0 or ran out\n"
    "  76     run: the lease was lost while the command ran; it was stopped\n"
    "  126    run: the command could not be executed\n"
    "  127    run: the command was not found\n"
    "  other  run: the command's own exit status; 128+N if signal N killed it\n";

const char help_main[] =
    "Usage: lockctl [--url URL] [-v] COMMAND [ARGS...]\n"
    "A client for lockgate, the HTTP lock gateway: run a command under a\n"
    "distributed lock, kept renewed while it runs, or use the API from the shell.\n"
    "\n"
    "Commands:\n"
    "  run NAME [OPTIONS] [--] CMD [ARGS...]  run CMD while holding lock NAME\n"
    "  acquire NAME [OPTIONS]   take lock NAME; print the answer (JSON), or with\n"
    "                           -q just the token\n"
    "  extend NAME [OPTIONS]    extend a lease (token: --token or $LOCKGATE_TOKEN)\n"
    "  release NAME [OPTIONS]   release a lock (token: --token or $LOCKGATE_TOKEN)\n"
    "  release --force NAME     end every hold on lock NAME, whatever the token\n"
    "  status NAME              show who holds lock NAME (exit 1: nobody does)\n"
    "  ls [PREFIX]              list held locks (names starting with PREFIX)\n"
    "  watch NAME               print lock NAME's state and every change of it\n"
    "  elect NAME --value V [--] CMD [ARGS...]  run CMD while leader of election NAME\n"
    "  observe NAME             print election NAME's leader and every change of it\n"
    "  id NAMESPACE [-n N]      print N new unique ids, one per line\n"
    "  help [COMMAND]           this text, or a command's\n"
    "\n"
    "Options of every command:\n"
    "  -u, --url URL     the gateway (default: $LOCKGATE_URL, else " CTL_DEFAULT_URL ")\n"
    "  -v, --verbose     report what lockctl does on stderr\n"
    "      --api-key-file FILE  the API key (<id>.<secret>, first line of FILE);\n"
    "                    default: $LOCKGATE_API_KEY.  Never given as an argument\n"
    "      --cacert FILE     trust this CA for an https:// gateway\n"
    "      --cert FILE, --key FILE  client certificate and key (mutual TLS)\n"
    "  -h, --help        help; `lockctl COMMAND --help` for a command's\n"
    "      --version     print the version\n"
    "\n"
    "Durations (MS) are milliseconds; a suffix ms, s, m or h may be given (30s, 5m).\n"
    "Errors are one line on stderr, starting with \"lockctl: \".\n"
    "\n";

const char help_run[] =
    "Usage: lockctl run NAME [OPTIONS] [--] COMMAND [ARGS...]\n"
    "Take lock NAME (waiting up to --wait), run COMMAND while holding it, renew\n"
    "the lease every third of the TTL for as long as COMMAND runs, release the\n"
    "lock when it exits, and exit with its exit status.\n"
    "\n"
    "  -t, --ttl MS        lease length (default 30000); renewed every MS/3\n"
    "  -w, --wait MS       wait this long for a busy lock (default 0: try once;\n"
    "                      \"forever\": no limit)\n"
    "      --shared        take it in shared (reader) mode\n"
    "      --fair          wait in line: first come, first served\n"
    "      --owner TEXT    shown by `lockctl status` (default \"lockctl on HOST, pid N\")\n"
    "      --max-hold MS   never hold it longer than this, renewals included; when\n"
    "                      it runs out the lease is lost (see below)\n"
    "      --lock-delay MS if the lease is lost, nobody may take the lock for MS\n"
    "      --grace MS      after SIGTERM on a lost lease, wait this long before\n"
    "                      SIGKILL (default 5000)\n"
    "      --session FILE  bind the lock to the gateway session whose token FILE\n"
    "                      holds, shared by every run given the same FILE: the\n"
    "                      first starts it (TTL from --ttl) and one renewer\n"
    "                      process, which ends it once no run uses it\n"
    "      --stream        hold the lock by lockctl's connection instead of a lease\n"
    "                      it renews (see below); not with --session or --max-hold\n"
    "  -q, --quiet         no message when the lock is busy (the status tells)\n"
    "  -u, --url URL, -v, --verbose, -h, --help: as for every command\n"
    "\n"
    "COMMAND gets LOCKGATE_NAME, LOCKGATE_FENCE (the fencing token), LOCKGATE_TOKEN\n"
    "and LOCKGATE_URL in its environment; it is looked up in $PATH.\n"
    "\n"
    "When the lock is busy and the wait is over: exit 75 and, unless -q, one line\n"
    "  lockctl: lock 'NAME' is held by someone else (try again in N s)\n"
    "\n"
    "Lease lost: when a renewal is answered not_held or not_owner (the lease ran\n"
    "out or the lock was taken away), or the gateway cannot be reached until the\n"
    "lease ends (errors and 5xx are retried with backoff, never past the lease),\n"
    "COMMAND's process group gets SIGTERM, SIGKILL after --grace, and lockctl\n"
    "exits 76 whatever COMMAND's status was.\n"
    "\n"
    "Signals: COMMAND runs in a process group of its own, so that lockctl can\n"
    "stop all of it; SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 sent\n"
    "to lockctl are passed on to that whole group, and lockctl releases the lock\n"
    "once COMMAND has exited.  When lockctl runs in the foreground of a terminal,\n"
    "it hands the terminal to COMMAND's group (Ctrl-C reaches COMMAND, which can\n"
    "read the terminal) and takes it back at the end; Ctrl-Z suspends COMMAND\n"
    "and lockctl together.  While lockctl is suspended it cannot renew: suspended\n"
    "past the lease, the lease is lost, and COMMAND is stopped on resumption.  If\n"
    "lockctl is killed (SIGKILL), COMMAND gets SIGTERM (Linux) and the lock\n"
    "expires at the end of its lease.  Processes COMMAND leaves running in the\n"
    "background after it exits are not waited for: the lock ends with COMMAND.\n"
    "\n"
    "--stream: the lock is taken as an event stream (Accept: text/event-stream)\n"
    "that the gateway keeps alive, and lockctl sends no renewals.  If lockctl is\n"
    "killed, its connection closes and the lock is free at once instead of at\n"
    "the end of the lease (a host that vanishes: once the gateway's heartbeat\n"
    "goes unanswered); --ttl then bounds only a gateway that dies.  The price: any break of the "
    "connection, a network blip or a\n"
    "gateway restart included, ends the hold, where the renewals ride it out\n"
    "until the lease ends.  The gateway's `event: lost` (a forced release, the\n"
    "hold lost in Redis) or the stream's end is a lost lease, as above: SIGTERM,\n"
    "SIGKILL after --grace, exit 76.  A gateway host that goes silent without\n"
    "closing is given up by TCP keepalive within about min(TTL/3, 10 s).\n"
    "\n";

const char help_acquire[] =
    "Usage: lockctl acquire NAME [OPTIONS]\n"
    "Take lock NAME and print the gateway's answer (JSON: name, token, fence,\n"
    "mode, count, ttl_ms), or with -q only the token.  Nothing renews this\n"
    "lease: extend it with `lockctl extend`, end it with `lockctl release`.\n"
    "\n"
    "  -t, --ttl MS        lease length (default 30000)\n"
    "  -w, --wait MS       wait this long for a busy lock (default 0: try once;\n"
    "                      \"forever\": no limit)\n"
    "      --token TOKEN   the holder's token (22-128 of A-Z a-z 0-9 _ -): re-enter\n"
    "                      a lock this token holds, or take it under this token\n"
    "      --shared, --fair, --owner TEXT, --max-hold MS, --lock-delay MS: as for run\n"
    "  -q, --quiet         print only the token\n"
    "\n";

const char help_extend[] =
    "Usage: lockctl extend NAME [--token TOKEN] [--ttl MS]\n"
    "Extend the lease of lock NAME held by TOKEN (default $LOCKGATE_TOKEN) to MS\n"
    "from now (default: the TTL it was taken with); print the answer (JSON).\n"
    "  -t, --ttl MS        the new lease (default: the TTL it was taken with)\n"
    "      --token TOKEN   the holder's token (default $LOCKGATE_TOKEN)\n"
    "  -q, --quiet         print nothing\n"
    "\n";

const char help_release[] =
    "Usage: lockctl release NAME [--token TOKEN]\n"
    "       lockctl release --force NAME\n"
    "Release one level of lock NAME held by TOKEN (default $LOCKGATE_TOKEN);\n"
    "print the answer (JSON: released, count).  --force ends every hold on\n"
    "NAME whatever the token (an operator's act; admin grant with auth).\n"
    "      --token TOKEN   the holder's token (default $LOCKGATE_TOKEN)\n"
    "      --force         end every hold, whatever the token\n"
    "  -q, --quiet         print nothing\n"
    "\n";

const char help_status[] =
    "Usage: lockctl status NAME\n"
    "Print who holds lock NAME (JSON: mode, holders, count, fence, ttl_ms, owner),\n"
    "or exit 1 with a message when nobody does.\n"
    "  -q, --quiet         print nothing: only the exit status tells\n"
    "\n";

const char help_ls[] =
    "Usage: lockctl ls [PREFIX]\n"
    "List the held locks whose names start with PREFIX (default: all), one line\n"
    "each: name, mode, each holder as owner(fence, ms left), fair waiters.\n"
    "  -q, --quiet         print the names only\n"
    "\n";

const char help_watch[] =
    "Usage: lockctl watch NAME\n"
    "Print lock NAME's state (JSON, as status prints it; {\"holders\":0} when\n"
    "nobody holds it), then a line each time it changes hands, is released,\n"
    "expires or is forced, until interrupted.  Costs the gateway no polling.\n"
    "  -q, --quiet         print nothing (waits until the gateway fails)\n"
    "\n";

const char help_id[] =
    "Usage: lockctl id NAMESPACE [-n N]\n"
    "Print N (default 1, at most 10000) new unique ids of NAMESPACE, one per line.\n"
    "  -n, --count N       how many ids\n"
    "\n";

void help_print(const char *text) {
    fputs(text, stdout);
    fputs(help_exit, stdout);
}

const char help_elect[] =
    "Usage: lockctl elect NAME --value V [OPTIONS] [--] COMMAND [ARGS...]\n"
    "Campaign in election NAME with value V, wait until elected (first come,\n"
    "first elected), run COMMAND while leader, renew the leadership's lease\n"
    "every third of the TTL, resign when COMMAND exits, and exit with its status.\n"
    "\n"
    "      --value V       the leader's value (e.g. this replica's address);\n"
    "                      required\n"
    "  -t, --ttl MS        the leadership's lease (default 30000): how long it\n"
    "                      outlives a lockctl that dies; renewed every MS/3\n"
    "  -w, --wait MS       give up after MS (default: wait until elected)\n"
    "      --grace MS      after SIGTERM on lost leadership, wait this long before\n"
    "                      SIGKILL (default 5000)\n"
    "  -q, --quiet         no message when the wait is over\n"
    "  -u, --url URL, -v, --verbose, -h, --help: as for every command\n"
    "\n"
    "COMMAND gets LOCKGATE_TERM (the term: it increases with every new leader;\n"
    "use it as a fencing token), LOCKGATE_NAME, LOCKGATE_TOKEN and LOCKGATE_URL.\n"
    "Leadership lost (a renewal answered not_held or not_owner, or the gateway\n"
    "unreachable until the lease ends): COMMAND's process group gets SIGTERM,\n"
    "SIGKILL after --grace, and lockctl exits 76.  Signals are passed on to\n"
    "COMMAND as for `lockctl run`.\n"
    "\n";

const char help_observe[] =
    "Usage: lockctl observe NAME\n"
    "Print election NAME's leader, then a line at each change of leader or value,\n"
    "in order, one JSON object a line ({\"name\",\"value\",\"term\",\"since_ms\"},\n"
    "or {\"name\",\"value\":null} when nobody leads), until interrupted.  Reads\n"
    "the gateway's event stream: no polling.\n"
    "  -q, --quiet         print nothing (waits until the gateway fails)\n"
    "\n";
