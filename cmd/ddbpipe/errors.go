package main

import (
	"errors"
	"fmt"
	"net"
	"regexp"
	"strings"
	"syscall"

	"github.com/ddbpipe/ddbpipe/shared/platform/jsonerr"
)

// userMessage is the one place an error becomes what the user reads: a
// local endpoint that does not answer says the stack is not running, JSON
// errors name fields and JSON types, and the package prefixes Go errors
// carry ("votes: poll: votes: rejected") are left out.
func userMessage(err error) string {
	if addr, ok := refusedLocally(err); ok {
		return fmt.Sprintf("the local stack is not running (nothing answers at %s): start it with `ddbpipe local up`; "+
			"if you sourced an old .ddbpipe/local.env, source the new one", addr)
	}
	if m := jsonerr.Describe(err); m != err.Error() {
		return m
	}
	return packagePrefix.ReplaceAllString(err.Error(), "")
}

// packagePrefix matches the "<package>: " with which the project's packages
// start their errors.
var packagePrefix = regexp.MustCompile(`\b(votes|votesddb|votessqs|voteslambda|objects|objectsddb|objectss3|objectsclient|archive|archiveddb|archives3|archiveduckdb|awsenv|stack|runner|servers|provision): `)

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
