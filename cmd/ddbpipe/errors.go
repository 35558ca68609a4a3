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
// user's own request caused (userErrors) reads in its package's words,
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
	for _, match := range userErrors {
		if e, ok := match(err); ok {
			return withoutPrefix(err.Error(), e)
		}
	}
	return err.Error()
}

// userErrors find in an error's chain the errors a user's request causes:
// input the packages refuse, and what the user asked for that does not
// exist. Each returns the error it found, whose prefix names its package.
var userErrors = []func(error) (error, bool){
	as[*votes.RejectError],
	as[*votes.PollError],
	is(votes.ErrNoPoll),
	is(votes.ErrPollExists),
	as[*archive.NamedQueryError],
	as[*archiveduckdb.QueryError],
	is(archiveduckdb.ErrEmpty),
	is(archiveduckdb.ErrUnknownTable),
}

// as matches an error of type T in the chain.
func as[T error](err error) (error, bool) {
	var target T
	if errors.As(err, &target) {
		return target, true
	}
	return nil, false
}

// is matches a sentinel error in the chain.
func is(sentinel error) func(error) (error, bool) {
	return func(err error) (error, bool) { return sentinel, errors.Is(err, sentinel) }
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
