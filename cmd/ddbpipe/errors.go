package main

import (
	"errors"
	"fmt"
	"net"
	"regexp"
	"strings"
	"syscall"

	"github.com/ddbpipe/ddbpipe/shared/archive"
	"github.com/ddbpipe/ddbpipe/shared/archive/archiveduckdb"
	"github.com/ddbpipe/ddbpipe/shared/platform/jsonerr"
	"github.com/ddbpipe/ddbpipe/shared/votes"
)

// userMessage is the one place an error becomes what the user reads, by
// the error's type: a local endpoint that does not answer says the stack
// is not running; JSON errors name fields and JSON types; an error the
// user's own request caused (userError) reads in its package's words,
// without that package's prefix ("votes: poll: votes: rejected" reads
// "poll: rejected"). Any other error is a failure of the pipeline or of
// its servers, shown whole: its package prefixes say where it arose,
// which is what a bug report needs.
func userMessage(err error) string {
	if addr, ok := refusedLocally(err); ok {
		return fmt.Sprintf("the local stack is not running (nothing answers at %s): start it with `ddbpipe local up`; "+
			"if you sourced an old .ddbpipe/local.env, source the new one", addr)
	}
	if m := jsonerr.Describe(err); m != err.Error() {
		return m
	}
	if e, ok := userError(err); ok {
		return withoutPrefix(err.Error(), e)
	}
	return err.Error()
}

// userError finds in an error's chain the error a user's request caused:
// input the packages refuse, and what the user asked for that does not
// exist. It returns the error it found, whose prefix names its package.
func userError(err error) (error, bool) {
	var (
		rejected *votes.RejectError
		poll     *votes.PollError
		named    *archive.NamedQueryError
		query    *archiveduckdb.QueryError
	)
	switch { // the first in this order, as an error may hold two
	case errors.As(err, &rejected):
		return rejected, true
	case errors.As(err, &poll):
		return poll, true
	case errors.Is(err, votes.ErrNoPoll):
		return votes.ErrNoPoll, true
	case errors.Is(err, votes.ErrPollExists):
		return votes.ErrPollExists, true
	case errors.As(err, &named):
		return named, true
	case errors.As(err, &query):
		return query, true
	case errors.Is(err, archiveduckdb.ErrEmpty):
		return archiveduckdb.ErrEmpty, true
	case errors.Is(err, archiveduckdb.ErrUnknownTable):
		return archiveduckdb.ErrUnknownTable, true
	}
	return nil, false
}

// withoutPrefix drops from msg the package prefix found's text starts with
// ("votes: "), wherever a part of msg (or a line of it) starts with it.
func withoutPrefix(msg string, found error) string {
	pkg, _, ok := strings.Cut(found.Error(), ": ")
	if !ok || strings.ContainsAny(pkg, " \n") {
		return msg
	}
	return regexp.MustCompile(`(^|: |\n)`+regexp.QuoteMeta(pkg)+`: `).ReplaceAllString(msg, "$1")
}

// refusedLocally reports a connection refused by a loopback address: a
// local server that is not running.
func refusedLocally(err error) (string, bool) {
	var op *net.OpError
	if !errors.As(err, &op) || !errors.Is(err, syscall.ECONNREFUSED) {
		return "", false
	}
	addr := ""
	if op.Addr != nil {
		addr = op.Addr.String()
	}
	host, _, splitErr := net.SplitHostPort(addr)
	if splitErr != nil {
		return "", false
	}
	if ip := net.ParseIP(host); (ip != nil && ip.IsLoopback()) || strings.EqualFold(host, "localhost") {
		return addr, true
	}
	return "", false
}
