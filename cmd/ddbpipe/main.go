// Command ddbpipe is the one CLI for ddbpipe's producers, analysts and
// operators, and for running the whole pipeline locally.
//
//	ddbpipe local install          install the local servers (first use does it too)
//	ddbpipe local up               run the local stack and runner until interrupted
//	ddbpipe local down             stop a running `local up`
//	ddbpipe local servers -- CMD   run CMD with local servers started for it (make test)
//	ddbpipe local invoke FUNCTION  invoke a function of the running stack
//	ddbpipe polls create|ls|get    create a poll, list them, read one
//	ddbpipe votes send             send votes (one, or a load with duplicates and a progress bar)
//	ddbpipe votes results          a poll's totals, read from every shard
//	ddbpipe votes rejected         a poll's rejected votes by reason, and the latest
//	ddbpipe votes audit            the counters against the archive, per poll and option
//	ddbpipe votes dlq inspect|redrive, votes rejects inspect, archive failures
//	                               the operator's queue commands (docs/operators.md)
//	ddbpipe archive backfill       heal a table's archive after lost stream records
//	ddbpipe objects search         find documents by words, type, size and date
//	ddbpipe search reindex|verify  rebuild the search index; compare it with the table
//	ddbpipe demo                   run the pipeline locally with a demo workload and report
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/ddbpipe/ddbpipe/local/servers"
)

// errUsage marks a command line that does not parse; main prints usage.
var errUsage = errors.New("usage")

type command struct {
	name, summary string
	run           func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

func commands() []command {
	return []command{
		{"local install", "install the local AWS servers into .local/ (done by first use too)", localInstall},
		{"local up", "run the local stack and runner until interrupted; writes .ddbpipe/local.env", localUp},
		{"local down", "stop the stack started by `ddbpipe local up`", localDown},
		{"local servers", "run a command with the local servers started for it and their endpoints exported: local servers -- CMD [ARG...]", localServers},
		{"local invoke", "invoke a function of the running local stack: local invoke FUNCTION [-event FILE]", localInvoke},
		{"local clock", "show or move every clock of the running local stack: local clock [-force|-reopen] [TIME|month-end+DURATION|+DURATION|now]", localClock},
		{"polls create", "create a poll: polls create -poll P -options a,b,c [-shards N]", pollsCreate},
		{"polls ls", "list the polls: polls ls [-json]", pollsLs},
		{"polls get", "one poll's definition: polls get [-json] P", pollsGet},
		{"votes send", "send votes: votes send -poll P [-count N -rate R -dup-rate D -options a,b] (checks the poll first; -no-check does not)", votesSend},
		{"votes results", "a poll's totals: votes results -poll P [-json]", votesResults},
		{"votes rejected", "a poll's rejected votes, through the API: counts by reason and the latest: votes rejected -poll P [-limit N] [-json]", votesRejected},
		{"votes audit", "the counters against the archive, per poll and option: votes audit [-poll P] [-wait D] [-json] (exits 1 when they differ)", votesAudit},
		{"votes dlq inspect", "read the votes dead-letter queue without consuming it, summarised: votes dlq inspect [-max N -samples N -json]", votesDLQInspect},
		{"votes dlq redrive", "move dead letters back to the votes queue, 10 at a time, each deleted only once sent: votes dlq redrive [-max N] [-dry-run] [-json]", votesDLQRedrive},
		{"votes rejects inspect", "read the rejects queue without consuming it, counted by reason: votes rejects inspect [-max N -samples N -json]", votesRejectsInspect},
		{"votes rejects redrive", "refused, with the reason: rejected votes are invalid", votesRejectsRedrive},
		{"objects put", "store a document: objects put [-file F] [-type T] [-if-match N] [-table] KEY (big ones are uploaded; the same bytes and type again write nothing and say unchanged, so a put is safe to retry)", objectsPut},
		{"objects get", "read a document, or some of its bytes: objects get [-version N] [-range a-b|a-|-n] [-o FILE] KEY", objectsGet},
		{"objects ls", "list documents by prefix: objects ls [-r] [-json] [PREFIX] (folders as PRE, like aws s3 ls)", objectsLs},
		{"objects search", "find documents by words of their key and text: objects search [-type T] [-min-size N] [-since T] [-prefix P] [-fresh] [-wait D] [-json] WORDS...", objectsSearch},
		{"objects versions", "list a document's versions: objects versions [-json] KEY", objectsVersions},
		{"objects rm", "delete a document: objects rm [-if-match N] KEY", objectsRm},
		{"objects update", "read-modify-write: objects update -exec 'CMD' [-retries N] KEY (the latest version through CMD, stored with If-Match)", objectsUpdate},
		{"objects upload", "upload a file through a presigned (multipart) upload: objects upload -file F [-type T] [-if-match N] KEY", objectsUpload},
		{"search reindex", "rebuild the search index from the objects table while the stream writes, then swap it in: search reindex [-keep-old] [-json]", searchReindex},
		{"search verify", "compare the objects table with the search index, key by key: search verify [-wait D] [-show N] [-json] (exits 1 on drift)", searchVerify},
		{"archive query", `SQL over the archive with DuckDB: archive query "SELECT ..." | -named NAME [-table T -month M -format table|csv|json]`, archiveQuery},
		{"archive ls", "the archive's partitions, files, rows, bytes and manifests: archive ls [-table T -month M -files]", archiveLs},
		{"archive backfill", "heal a table's archive after lost stream records: write only what the archive misses, from a Scan: archive backfill -table T [-dry-run]", archiveBackfill},
		{"archive failures", "the stream batches the archiver gave up on: table, shard, range, and what to do: archive failures [-max N -json]", archiveFailures},
		{"tables", "monthly ledger tables: tables rotate [-now 2026-12-03T00:00:00Z] [-json] | tables ls [-now T]", tables},
		{"demo", "run the whole pipeline locally with a demo workload, print what happened, stop", demo},
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	var status exitStatus
	if errors.As(err, &status) {
		os.Exit(int(status))
	}
	if errors.Is(err, errUsage) || errors.Is(err, flag.ErrHelp) {
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "ddbpipe:", userMessage(err))
		os.Exit(1)
	}
}

// run finds the command and runs it. Help asked for (-h, -help, --help,
// `help`, `help CMD`) goes to stdout and is not an error; help printed
// because a command line did not parse goes to stderr with errUsage.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "help" {
		if len(args) == 1 {
			usage(stdout)
			return nil
		}
		args = append(args[1:], "-h")
	}
	for _, c := range commands() {
		words := strings.Fields(c.name)
		if len(args) >= len(words) && strings.Join(args[:len(words)], " ") == c.name {
			rest := args[len(words):]
			if !wantsHelp(rest) {
				return c.run(ctx, rest, stdout, stderr)
			}
			fmt.Fprintf(stdout, "ddbpipe %s: %s\n\n", c.name, c.summary)
			err := c.run(ctx, rest, stdout, stdout)
			if errors.Is(err, flag.ErrHelp) {
				return nil
			}
			return err
		}
	}
	if len(args) == 0 || wantsHelp(args[:1]) {
		if len(args) == 0 {
			usage(stderr)
			return errUsage
		}
		usage(stdout)
		return nil
	}
	fmt.Fprintf(stderr, "ddbpipe: unknown command %q\n\n", strings.Join(args, " "))
	usage(stderr)
	return errUsage
}

// wantsHelp reports whether a command's arguments ask for its help before
// any "--" (after it they belong to another program: local servers -- CMD).
func wantsHelp(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "-h", "-help", "--help", "--h":
			return true
		}
	}
	return false
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: ddbpipe <command> [flags]")
	fmt.Fprintln(w)
	width := 0
	for _, c := range commands() {
		width = max(width, len(c.name))
	}
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-*s %s\n", width, c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun `ddbpipe <command> -h` for a command's flags.")
}

// findRoot is -root, or the folder holding template.yaml at or above the
// working directory.
func findRoot(flagValue string) (string, error) {
	if flagValue != "" {
		return filepath.Abs(flagValue)
	}
	root, err := servers.FindRoot(".")
	if errors.Is(err, servers.ErrNoRoot) {
		return "", errors.New("no template.yaml here or above: run inside the ddbpipe repository or pass -root")
	}
	return root, err
}

// paramFlags collects repeated -param Name=Value flags.
type paramFlags map[string]string

func (p paramFlags) String() string { return fmt.Sprint(map[string]string(p)) }
func (p paramFlags) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || k == "" {
		return fmt.Errorf("want Name=Value, got %q", v)
	}
	p[k] = val
	return nil
}
