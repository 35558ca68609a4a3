// Package badinput is one corpus of hostile and malformed input for every
// entry point of the pipeline: the votes queue (SQS), the HTTP API, the
// ledger's stream (the archiver) and the CLI. Each case says what must
// become of it: the reject reason, the HTTP status, the quarantine reason
// or the CLI's error. tests/badinput_test.go drives every case through its
// entry point on the local stack and checks that nothing was counted,
// stored or lost; the soak's report names the corpus's size.
//
// It is data only, for the local tests and the soak: no product package
// imports it.
package badinput

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// The entry points.
const (
	SQS    = "sqs"    // a message on the votes queue: Body; Want is the reject reason
	HTTP   = "http"   // a request to the API: Method, Path, Header, Body, Unsigned; Status
	Stream = "stream" // a record of a ledger stream event: Body; Want is in the quarantine reasons
	CLI    = "cli"    // a ddbpipe command line: Args; Want is in its error
)

// Placeholders the driver fills in: a poll it created with options a and
// b, times relative to the run (RFC 3339), and the API's base URL.
const (
	Poll = "$POLL"
	Now  = "$NOW"
	// BeforePoll is two hours before the run: before the driver's poll
	// was created by more than the clock skew allowed (an hour), in a
	// month the counter still takes votes for (this one, or the last in
	// its grace).
	BeforePoll = "$BEFORE_POLL"
	// MonthsAgo is 40 days before the run: a month whose grace is over.
	MonthsAgo = "$MONTHS_AGO"
	APIURL    = "$API"
)

// Ranged is a document of RangedSize bytes that the driver stores before
// the cases run, for the Range cases to name.
const (
	Ranged     = "badinput/ranged.txt"
	RangedSize = 100
)

// Case is one bad input and what must become of it.
type Case struct {
	Entry string
	Name  string

	Body     string            // SQS message body, HTTP body, or stream record JSON
	Method   string            // HTTP
	Path     string            // HTTP, from the API's root
	Header   map[string]string // HTTP
	Unsigned bool              // HTTP: sent without SigV4 (the API requires it)
	Gateway  bool              // HTTP: API Gateway answers, {"message":…}, before any function
	Args     []string          // CLI

	Status int    // HTTP: the status wanted
	Want   string // SQS: the reject reason; stream: in a quarantine reason; CLI: in the error
}

// ID names a case: entry/name.
func (c Case) ID() string { return c.Entry + "/" + c.Name }

func vote(id, poll, option, voter, castAt string) string {
	return fmt.Sprintf(`{"voteId":%q,"pollId":%q,"optionId":%q,"voterId":%q,"castAt":%q}`, id, poll, option, voter, castAt)
}

// record is a ledger stream record as Lambda delivers it, with keys and a
// new image given as DynamoDB JSON.
func record(seq, keys, image string) string {
	return fmt.Sprintf(`{"eventID":"bad-%s","eventName":"INSERT","eventVersion":"1.1","eventSource":"aws:dynamodb","awsRegion":"us-east-1",`+
		`"eventSourceARN":"arn:aws:dynamodb:us-east-1:000000000000:table/$TABLE/stream/2026-11-01T00:00:00.000",`+
		`"dynamodb":{"ApproximateCreationDateTime":1793491200,"SequenceNumber":%q,"SizeBytes":100,"StreamViewType":"NEW_AND_OLD_IMAGES","Keys":%s,"NewImage":%s}}`,
		seq, seq, keys, image)
}

const goodKeys = `{"pk":{"S":"p#1"},"sk":{"S":"u#v"}}`

func sqsCases() []Case {
	good := func(id string) string { return vote(id, Poll, "a", "u-"+id, Now) }
	c := func(name, body, want string) Case { return Case{Entry: SQS, Name: name, Body: body, Want: want} }
	return []Case{
		c("not JSON", "this is not JSON", "malformed-json"),
		c("JSON array", `["a","b"]`, "malformed-json"),
		c("JSON string", `"vote"`, "malformed-json"),
		c("truncated object", `{"voteId":"t1","pollId":`, "malformed-json"),
		c("trailing data", good("trail")+" {}", "malformed-json"),
		c("two objects", good("two-a")+good("two-b"), "malformed-json"),
		c("optionId a number", `{"voteId":"w1","pollId":"`+Poll+`","optionId":7,"voterId":"u","castAt":"`+Now+`"}`, "wrong-type"),
		c("voteId an object", `{"voteId":{"$ne":null},"pollId":"`+Poll+`","optionId":"a","voterId":"u","castAt":"`+Now+`"}`, "wrong-type"),
		c("castAt a number", `{"voteId":"w3","pollId":"`+Poll+`","optionId":"a","voterId":"u","castAt":1795000000}`, "wrong-type"),
		c("voterId missing", `{"voteId":"m1","pollId":"`+Poll+`","optionId":"a","castAt":"`+Now+`"}`, "missing-field"),
		c("pollId null", `{"voteId":"n1","pollId":null,"optionId":"a","voterId":"u","castAt":"`+Now+`"}`, "missing-field"),
		c("empty voteId", vote("", Poll, "a", "u", Now), "empty-id"),
		c("129-character voteId", vote(strings.Repeat("x", 129), Poll, "a", "u", Now), "id-too-long"),
		c("hash in voterId", vote("h1", Poll, "a", "u#1", Now), "bad-id"),
		c("newline in voterId", vote("h2", Poll, "a", "u\n1", Now), "bad-id"),
		c("escaped NUL in optionId", `{"voteId":"h3","pollId":"`+Poll+`","optionId":"a\u0000","voterId":"u","castAt":"`+Now+`"}`, "bad-id"),
		c("raw control character in a string", "{\"voteId\":\"h4\",\"pollId\":\""+Poll+"\",\"optionId\":\"a\x01\",\"voterId\":\"u\",\"castAt\":\""+Now+"\"}", "malformed-json"),
		c("unknown poll", vote("p1", "no-such-poll-anywhere", "a", "u", Now), "unknown-poll"),
		c("unknown option", vote("o1", Poll, "zzz", "u", Now), "unknown-option"),
		c("SQL in the option", vote("o2", Poll, "'; DROP TABLE votes; --", "u", Now), "unknown-option"),
		c("path traversal as the poll", vote("o3", "../../etc/passwd", "a", "u", Now), "unknown-poll"),
		c("right-to-left override in the option", vote("o4", Poll, "a\u202eb", "u", Now), "unknown-option"),
		c("castAt in 2099 (clock skew)", vote("f1", Poll, "a", "u", "2099-01-01T00:00:00Z"), "cast-at-in-future"),
		// A month takes votes until its end plus a grace of 2 days:
		// earlier months are refused whatever the poll, and nothing creates
		// their tables. The fixed dates are past their grace on any run
		// from November 2026 on.
		c("castAt 1970-01-01", vote("e1", Poll, "a", "u", "1970-01-01T00:00:00Z"), "month-closed"),
		c("castAt 0001-01-01, the zero time", vote("e2", Poll, "a", "u", "0001-01-01T00:00:00Z"), "month-closed"),
		c("castAt two years back", vote("e3", Poll, "a", "u", "2024-11-25T00:00:00Z"), "month-closed"),
		c("castAt 40 days back, a retired month", vote("e4", Poll, "a", "u", MonthsAgo), "month-closed"),
		c("castAt 40 days back, unknown poll", vote("e5", "no-such-poll-anywhere", "a", "u", MonthsAgo), "month-closed"),
		// The driver's poll is created as the run starts: a vote cast
		// earlier, less the clock skew allowed, is early.
		c("castAt two hours before the poll was created", vote("e6", Poll, "a", "u", BeforePoll), "poll-not-open"),
		c("castAt not a time", vote("b1", Poll, "a", "u", "yesterday"), "bad-cast-at"),
		c("castAt without a zone", vote("b2", Poll, "a", "u", "2026-11-24T10:00:00"), "bad-cast-at"),
		// SQS and Lambda's JSON event carry text: invalid bytes arrive as
		// U+FFFD, which makes an option no poll has.
		c("invalid UTF-8 in the option", `{"voteId":"u1","pollId":"`+Poll+`","optionId":"a`+"\xff\xfe"+`","voterId":"u","castAt":"`+Now+`"}`, "unknown-option"),
		c("17 KiB body", vote("big", Poll, "a", strings.Repeat("v", 17<<10), Now), "too-large"),
	}
}

// httpCase is a case of the HTTP API.
func httpCase(name, method, path string, header map[string]string, body string, status int) Case {
	return Case{Entry: HTTP, Name: name, Method: method, Path: path, Header: header, Body: body, Status: status}
}

// jsonType is a Content-Type header of JSON.
func jsonType() map[string]string { return map[string]string{"Content-Type": "application/json"} }

func httpCases() []Case {
	c := httpCase
	cases := slices.Concat(pollHTTPCases(), objectHTTPCases(), rangeHTTPCases())
	// API Gateway answers these itself: a path or query that does not
	// decode to UTF-8 (an event is JSON), headers over its limit.
	for i := range cases {
		switch cases[i].Name {
		case "object: invalid UTF-8 in the key", "object: overlong UTF-8 slash", "list: prefix not UTF-8", "object: 20 KB header":
			cases[i].Gateway = true
		}
	}
	// Without a signature the API refuses before any function runs.
	for _, u := range []Case{
		c("unsigned: create a poll", "POST", "/polls", jsonType(), `{"pollId":"u1","options":["a"]}`, 403),
		c("unsigned: put an object", "PUT", "/objects/badinput/unsigned", nil, "x", 403),
		c("unsigned: read results", "GET", "/polls/"+Poll+"/results", nil, "", 403),
		c("forged Authorization header", "GET", "/objects/badinput/doc", map[string]string{"Authorization": "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261124/us-east-1/execute-api/aws4_request, SignedHeaders=host, Signature=00"}, "", 403),
	} {
		u.Unsigned, u.Gateway = true, true
		cases = append(cases, u)
	}
	return cases
}

// pollHTTPCases are the polls' routes' bad requests.
func pollHTTPCases() []Case {
	c := httpCase
	return []Case{
		c("poll: malformed JSON", "POST", "/polls", jsonType(), `{"pollId":`, 400),
		c("poll: options a string", "POST", "/polls", jsonType(), `{"pollId":"h1","options":"a,b"}`, 400),
		c("poll: no options", "POST", "/polls", jsonType(), `{"pollId":"h2","options":[]}`, 400),
		c("poll: hash in the id", "POST", "/polls", jsonType(), `{"pollId":"h#3","options":["a"]}`, 400),
		c("poll: traversal as the id", "POST", "/polls", jsonType(), `{"pollId":"../x","options":["a"]}`, 400),
		c("poll: slash in the id", "POST", "/polls", jsonType(), `{"pollId":"a/b","options":["a"]}`, 400),
		c("poll: the id ..", "POST", "/polls", jsonType(), `{"pollId":"..","options":["a"]}`, 400),
		c("poll: shards a string", "POST", "/polls", jsonType(), `{"pollId":"h10","options":["a"],"shards":"8"}`, 400),
		c("poll: unknown field with &", "POST", "/polls", jsonType(), `{"pollId":"h11","options":["a"],"a&b":1}`, 400),
		c("poll: duplicate options", "POST", "/polls", jsonType(), `{"pollId":"h4","options":["a","a"]}`, 400),
		c("poll: 100000 shards", "POST", "/polls", jsonType(), `{"pollId":"h5","options":["a"],"shards":100000}`, 400),
		c("poll: a binary body", "POST", "/polls", map[string]string{"Content-Type": "application/octet-stream"}, `{"pollId":"h6","options":["a"]}`, 415),
		c("poll: a text/plain body", "POST", "/polls", map[string]string{"Content-Type": "text/plain"}, `{"pollId":"h8","options":["a"]}`, 415),
		c("poll: no Content-Type", "POST", "/polls", nil, `{"pollId":"h9","options":["a"]}`, 415),
		c("poll: 70 KiB body", "POST", "/polls", jsonType(), `{"pollId":"h7","options":["`+strings.Repeat("o", 70<<10)+`"]}`, 413),
		c("poll: exists already", "POST", "/polls", jsonType(), `{"pollId":"`+Poll+`","options":["a","b"]}`, 409),
		c("results: no such poll", "GET", "/polls/no-such-poll-anywhere/results", nil, "", 404),
		c("results: maxAge not a number", "GET", "/polls/"+Poll+"/results?maxAge=soon", nil, "", 400),
	}
}

// objectHTTPCases are the objects' and the listing's bad requests.
func objectHTTPCases() []Case {
	c := httpCase
	return []Case{
		c("object: invalid UTF-8 in the key", "GET", "/objects/%FF%FE", nil, "", 400),
		c("object: NUL in the key", "PUT", "/objects/a%00b", nil, "x", 400),
		c("object: NUL alone as the key", "GET", "/objects/%00", nil, "", 400),
		c("object: two sub-resources", "GET", "/objects/badinput/doc?versions&uploads", nil, "", 400),
		c("object: versions of one version", "GET", "/objects/badinput/doc?versions&version=1", nil, "", 400),
		c("object: unknown sub-resource", "GET", "/objects/badinput/doc?acl", nil, "", 400),
		c("object: overlong UTF-8 slash", "GET", "/objects/a%C0%AFb", nil, "", 400),
		c("object: version overflow", "GET", "/objects/badinput/doc?version=99999999999999999999", nil, "", 400),
		c("object: If-Match not a version", "PUT", "/objects/badinput/doc", map[string]string{"If-Match": "abc"}, "x", 400),
		c("object: 20 KB header", "GET", "/objects/badinput/doc", map[string]string{"X-Junk": strings.Repeat("j", 20000)}, "", 431),
		c("object: JSON bomb as an upload", "POST", "/objects/badinput/big?uploads", jsonType(), strings.Repeat("[", 100000), 400),
		c("object: upload with a string size", "POST", "/objects/badinput/big?uploads", jsonType(), `{"size":"big"}`, 400),
		c("object: upload with a negative size", "POST", "/objects/badinput/big?uploads", jsonType(), `{"size":-1}`, 400),
		c("object: missing", "GET", "/objects/badinput/never-written", nil, "", 404),
		c("list: prefix with a NUL", "GET", "/objects?prefix=docs%2F%00", nil, "", 400),
		c("list: prefix not UTF-8", "GET", "/objects?prefix=docs%FF", nil, "", 400),
		c("list: prefix over 1,024 bytes", "GET", "/objects?prefix="+strings.Repeat("p", 1025), nil, "", 400),
		c("list: two-character delimiter", "GET", "/objects?delimiter=%2F%2F", nil, "", 400),
		c("list: NUL as the delimiter", "GET", "/objects?delimiter=%00", nil, "", 400),
		c("list: limit 0", "GET", "/objects?limit=0", nil, "", 400),
		c("list: limit 1001", "GET", "/objects?limit=1001", nil, "", 400),
		c("list: limit not a number", "GET", "/objects?limit=all", nil, "", 400),
		c("list: cursor not base64", "GET", "/objects?cursor=%21%21%21", nil, "", 400),
		c("list: cursor forged for another prefix", "GET", "/objects?prefix=a&cursor=MjAeV7kzsKeCA2I", nil, "", 400),
		c("list: 2 KB cursor", "GET", "/objects?cursor="+strings.Repeat("A", 2000), nil, "", 400),
		c("list: unknown parameter", "GET", "/objects?marker=x", nil, "", 400),
	}
}

// rangeHTTPCases are bad Range headers.
func rangeHTTPCases() []Case {
	c := httpCase
	rng := func(v string) map[string]string { return map[string]string{"Range": v} }
	return []Case{
		// Range: one range per request, in digits, within the document.
		c("range: two ranges", "GET", "/objects/"+Ranged, rng("bytes=0-1,5-6"), "", 416),
		c("range: overlapping ranges", "GET", "/objects/"+Ranged, rng("bytes=0-50,25-75"), "", 416),
		c("range: 1,000 ranges", "GET", "/objects/"+Ranged, rng("bytes="+strings.TrimSuffix(strings.Repeat("0-0,", 1000), ",")), "", 416),
		c("range: reversed", "GET", "/objects/"+Ranged, rng("bytes=50-10"), "", 400),
		c("range: no unit", "GET", "/objects/"+Ranged, rng("0-10"), "", 400),
		c("range: words", "GET", "/objects/"+Ranged, rng("bytes=first-last"), "", 400),
		c("range: negative first byte", "GET", "/objects/"+Ranged, rng("bytes=-5-10"), "", 400),
		c("range: a bare dash", "GET", "/objects/"+Ranged, rng("bytes=-"), "", 400),
		c("range: starts at the end", "GET", "/objects/"+Ranged, rng(fmt.Sprintf("bytes=%d-", RangedSize)), "", 416),
		c("range: first byte past int64", "GET", "/objects/"+Ranged, rng("bytes=99999999999999999999-"), "", 416),
		c("range: suffix of zero", "GET", "/objects/"+Ranged, rng("bytes=-0"), "", 416),
		c("range: on a missing object", "GET", "/objects/badinput/never-written", rng("bytes=0-1"), "", 404),
	}
}

func streamCases() []Case {
	c := func(name, rec, want string) Case { return Case{Entry: Stream, Name: name, Body: rec, Want: want} }
	seq := func(i int) string { return fmt.Sprintf("9%020d", i) }
	return []Case{
		c("number that is not one", record(seq(1), goodKeys, `{"n":{"N":"1,5"}}`), "NewImage.n"),
		c("number out of range", record(seq(2), goodKeys, `{"n":{"N":"1e999999"}}`), "NewImage.n"),
		c("empty string set", record(seq(3), goodKeys, `{"s":{"SS":[]}}`), "NewImage.s"),
		c("string set with duplicates", record(seq(4), goodKeys, `{"s":{"SS":["a","a"]}}`), "NewImage.s"),
		c("number set with a word", record(seq(6), goodKeys, `{"ns":{"NS":["1","two"]}}`), "NewImage.ns"),
		c("number set with the same number twice", record(seq(11), goodKeys, `{"ns":{"NS":["1","1.0"]}}`), "NewImage.ns"),
		c("binary set with duplicates", record(seq(12), goodKeys, `{"bs":{"BS":["AAE=","AAE="]}}`), "NewImage.bs"),
		c("number of 40 digits", record(seq(13), goodKeys, `{"n":{"N":"1234567890123456789012345678901234567890"}}`), "NewImage.n"),
		c("empty set deep in a map", record(seq(14), goodKeys, `{"m":{"M":{"a":{"M":{"s":{"SS":[]}}}}}}`), "NewImage.m"),
		c("key that is a number that is not one", record(seq(7), `{"pk":{"N":"abc"},"sk":{"S":"x"}}`, `{"a":{"S":"b"}}`), "Keys.pk"),
		c("nested list with a bad number", record(seq(8), goodKeys, `{"l":{"L":[{"M":{"x":{"N":"--1"}}}]}}`), "NewImage.l"),
		c("ARN of no table", strings.Replace(record(seq(9), goodKeys, `{"a":{"S":"b"}}`), "table/$TABLE/stream/", "function/x/", 1), "not a DynamoDB stream ARN"),
		c("ARN of another service", strings.Replace(record(seq(10), goodKeys, `{"a":{"S":"b"}}`), "arn:aws:dynamodb:", "arn:aws:s3:", 1), "not a DynamoDB stream ARN"),
	}
}

func cliCases() []Case {
	c := func(name, want string, args ...string) Case {
		return Case{Entry: CLI, Name: name, Args: args, Want: want}
	}
	return []Case{
		c("no command", "usage: ddbpipe"),
		c("unknown command", `unknown command "frobnicate"`, "frobnicate"),
		c("shell in the command", "unknown command", "local; rm -rf /"),
		c("votes send without a poll", "--poll is required", "votes", "send"),
		c("votes send: negative count", "want at least 1", "votes", "send", "-poll", "p", "-count", "-5"),
		c("votes send: rate not a number", `invalid value "abc" for flag -rate`, "votes", "send", "-poll", "p", "-rate", "abc"),
		c("votes send: dup-rate over 1", "want a share between 0 and 1", "votes", "send", "-poll", "p", "-dup-rate", "2"),
		c("votes send: hash in the poll", "bad-id", "votes", "send", "-poll", "p#x"),
		c("votes send: empty options", "empty-id", "votes", "send", "-poll", "p", "-options", ",,"),
		c("polls create: no options", "needs 1 to 100 options", "polls", "create", "-poll", "p"),
		c("polls create: 100000 shards", "shards must be 1 to 1000", "polls", "create", "-poll", "p", "-options", "a,b", "-shards", "100000"),
		c("objects put without a key", "want one object key", "objects", "put"),
		c("objects rm: If-Match not a number", `invalid value "abc" for flag -if-match`, "objects", "rm", "-if-match", "abc", "k"),
		c("objects put: key not UTF-8", "400", "objects", "put", "-api", APIURL, "-file", "/dev/null", "a\xffb"),
		c("objects get: key over 1,024 bytes", "key-too-long", "objects", "get", "-api", APIURL, strings.Repeat("k", 1025)),
		c("objects ls: two prefixes", "at most one prefix", "objects", "ls", "a/", "b/"),
		c("objects ls: a prefix no key can start", "bad-prefix", "objects", "ls", "-api", APIURL, strings.Repeat("p", 1025)),
		c("objects ls: page of 5000", "bad-limit", "objects", "ls", "-api", APIURL, "-page", "5000", "docs/"),
		c("objects get: reversed range", "bad-range", "objects", "get", "-api", APIURL, "-range", "5-2", Ranged),
		c("objects get: two ranges", "multiple-ranges", "objects", "get", "-api", APIURL, "-range", "0-1,5-6", Ranged),
		c("objects get: range past the end", "range-not-satisfiable", "objects", "get", "-api", APIURL, "-range", fmt.Sprintf("%d-", RangedSize+5), Ranged),
		c("archive query: output format", `want table, csv or json`, "archive", "query", "-format", "xml", "SELECT 1"),
		c("archive ls: month 13", "want YYYY-MM", "archive", "ls", "-month", "2026-13"),
		c("tables rotate: -now not a time", "want an RFC 3339 time", "tables", "rotate", "-now", "yesterday"),
		c("votes dlq inspect: negative max", "at least 0", "votes", "dlq", "inspect", "-max", "-1"),
		c("local invoke without a function", "usage: ddbpipe local invoke FUNCTION", "local", "invoke"),
		c("votes send: unknown poll", `no poll "no-such-poll"`, "votes", "send", "-poll", "no-such-poll"),
		c("votes send: unknown option", `has no option "zzz"; its options are a, b`, "votes", "send", "-poll", Poll, "-options", "a,zzz"),
		c("votes send: no-check without options", "--options is required with --no-check", "votes", "send", "-poll", Poll, "-no-check"),
		c("polls get: unknown poll", `no poll "no-such-poll"`, "polls", "get", "no-such-poll"),
		c("polls get: two ids", "want one poll id", "polls", "get", "a", "b"),
		c("polls ls: an argument", "polls ls takes no arguments", "polls", "ls", "extra"),
		c("polls create: id with a slash", "a poll id is one URL path segment", "polls", "create", "-poll", "../x", "-options", "a"),
		c("votes results: unknown poll", `no poll "no-such-poll"`, "votes", "results", "-poll", "no-such-poll"),
		c("votes audit: unknown poll", `no poll "no-such-poll"`, "votes", "audit", "-poll", "no-such-poll"),
		c("votes audit: an argument", `unexpected argument "everything"`, "votes", "audit", "everything"),
	}
}

// Cases is the whole corpus, entry point by entry point.
func Cases() []Case {
	var all []Case
	for _, f := range []func() []Case{sqsCases, httpCases, streamCases, cliCases} {
		all = append(all, f()...)
	}
	return all
}

// Count is the number of cases per entry point.
func Count() map[string]int {
	n := map[string]int{}
	for _, c := range Cases() {
		n[c.Entry]++
	}
	return n
}

// Summary is the corpus in one line, for reports.
func Summary() string {
	n := Count()
	entries := make([]string, 0, len(n))
	total := 0
	for e, k := range n {
		entries = append(entries, fmt.Sprintf("%s %d", e, k))
		total += k
	}
	sort.Strings(entries)
	return fmt.Sprintf("%d cases (%s), driven through their entry points by tests/badinput_test.go in every `make test`: each rejected with its reason, nothing counted, stored or lost",
		total, strings.Join(entries, ", "))
}
