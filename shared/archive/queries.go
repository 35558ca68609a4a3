package archive

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/ddbpipe/ddbpipe/shared/ledger"
)

// NamedQuery is an analyst's question about the archive, as SQL that runs
// unchanged in Athena (Trino) and in DuckDB (`ddbpipe archive query -named`).
// template.yaml's AWS::Athena::NamedQuery resources carry the same text (a
// test compares them), so the two cannot drift.
//
// The SQL reads one table per source table, named for its layout's data:
// votes (the monthly vote ledgers, LedgerLayout) and objects (the objects
// table, ObjectsLayout); a Glue table each in Athena, a view each in DuckDB,
// with the same typed columns (see archiveparquet). Every query is limited
// to one month, its first "?" parameter (YYYY-MM), so it reads one
// partition: what it costs does not grow with the archive.
//
// A "?" is a parameter, given at run time (Athena's execution parameters,
// DuckDB's prepared statements). ${Name} variables, if a query ever needs
// one, are filled by the template's !Sub in AWS and by Expand locally.
//
// Counting votes is exact: a retired month holds one replayed row per vote
// (ReplayRows), the live month one INSERT per vote, and
//
//	replayed = (SELECT bool_or(r.replayed) FROM votes r WHERE r.month = v.month)
//
// keeps only the replayed rows of a month that has any, so a compaction
// interrupted between writing the month's state and deleting the stream's
// files does not count a vote twice.
type NamedQuery struct {
	Name        string // kebab-case, as `-named` takes it
	Description string
	Params      []string // what each "?" stands for, in order
	SQL         string
}

// exactVotes is the condition that keeps each vote of a month once.
const exactVotes = `event_name <> 'REMOVE'
  AND replayed = (SELECT bool_or(r.replayed) FROM votes r WHERE r.month = v.month)`

// VotesPerPollOption is every vote the archive holds, counted per poll and
// option over all months, each vote once (as the named queries count).
// It reads the whole votes archive, so it is not a named query: it is the
// operator's audit of the counters (`ddbpipe votes audit`).
const VotesPerPollOption = `SELECT poll_id, option_id, count(*) AS votes
FROM votes v
WHERE ` + exactVotes + `
GROUP BY poll_id, option_id
ORDER BY poll_id, option_id
`

// NamedQueries are the archive's named queries, in a stable order.
var NamedQueries = []NamedQuery{
	{
		Name:        "votes-per-option",
		Description: "Votes per option of one poll in one month, exactly as the ledger holds them.",
		Params:      []string{"month (YYYY-MM)", "poll id"},
		SQL: `SELECT option_id, count(*) AS votes
FROM votes v
WHERE month = ? AND poll_id = ?
  AND ` + exactVotes + `
GROUP BY option_id
ORDER BY option_id
`,
	},
	{
		Name:        "votes-per-poll-per-day",
		Description: "Votes per poll and option per UTC day (of the vote) in one month.",
		Params:      []string{"month (YYYY-MM)"},
		SQL: `SELECT poll_id, option_id, CAST(date_trunc('day', cast_at) AS DATE) AS day, count(*) AS votes
FROM votes v
WHERE month = ?
  AND ` + exactVotes + `
GROUP BY poll_id, option_id, CAST(date_trunc('day', cast_at) AS DATE)
ORDER BY day, poll_id, option_id
`,
	},
	{
		Name:        "voter-history",
		Description: "Every vote one voter cast in one month, oldest first.",
		Params:      []string{"month (YYYY-MM)", "voter id"},
		SQL: `SELECT cast_at, poll_id, option_id, vote_id, counted_at
FROM votes v
WHERE month = ? AND voter_id = ?
  AND ` + exactVotes + `
ORDER BY cast_at, vote_id
`,
	},
	{
		Name:        "object-changes",
		Description: "Every change to one object's items (its head, versions and chunks) recorded in one month, in stream order.",
		Params:      []string{"month (YYYY-MM)", "object key"},
		SQL: `SELECT recorded_at, event_name, sort_key, version, placement, size, deleted, ttl_delete, extra
FROM objects
WHERE month = ? AND object_key = ?
ORDER BY lpad(sequence_number, 40, '0')
`,
	},
}

// CheckArgs checks the arguments given for a named query's "?"s: as many
// as it has, and a month (YYYY-MM) where one is due, so arguments given in
// the wrong order fail instead of matching no row.
func (q NamedQuery) CheckArgs(args []string) error {
	if len(args) != len(q.Params) {
		return namedQueryError("%s takes %d arguments (%s), got %d", q.Name, len(q.Params), strings.Join(q.Params, ", "), len(args))
	}
	for i, p := range q.Params {
		if !strings.HasPrefix(p, "month") {
			continue
		}
		if _, err := ledger.Opens(args[i]); err != nil {
			return namedQueryError("%s: argument %d is the %s, and %q is not one (its arguments, in order: %s)",
				q.Name, i+1, p, args[i], strings.Join(q.Params, ", "))
		}
	}
	return nil
}

// LookupNamedQuery finds a named query by name.
func LookupNamedQuery(name string) (NamedQuery, error) {
	for _, q := range NamedQueries {
		if q.Name == name {
			return q, nil
		}
	}
	names := make([]string, len(NamedQueries))
	for i, q := range NamedQueries {
		names[i] = q.Name
	}
	return NamedQuery{}, namedQueryError("no named query %q (there are: %s)", name, strings.Join(names, ", "))
}

// NamedQueryError is a named query asked for that does not exist, or
// arguments it does not take.
type NamedQueryError struct{ Detail string }

func (e *NamedQueryError) Error() string { return "archive: " + e.Detail }

func namedQueryError(format string, args ...any) *NamedQueryError {
	return &NamedQueryError{Detail: fmt.Sprintf(format, args...)}
}

var subVariable = regexp.MustCompile(`\$\{([A-Za-z0-9_:.]+)\}`)

// Variables lists the ${...} variables the SQL uses, sorted.
func (q NamedQuery) Variables() []string {
	seen := map[string]bool{}
	for _, m := range subVariable.FindAllStringSubmatch(q.SQL, -1) {
		seen[m[1]] = true
	}
	vars := make([]string, 0, len(seen))
	for v := range seen {
		vars = append(vars, v)
	}
	sort.Strings(vars)
	return vars
}

// Expand fills the query's variables, as CloudFormation's !Sub does. A
// variable without a value is an error. Values are table names, never user
// input: the user's values are the query's "?" parameters.
func (q NamedQuery) Expand(vars map[string]string) (string, error) {
	var missing []string
	out := subVariable.ReplaceAllStringFunc(q.SQL, func(m string) string {
		name := m[2 : len(m)-1]
		v, ok := vars[name]
		if !ok {
			missing = append(missing, name)
		}
		return v
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("archive: named query %s: no value for %s", q.Name, strings.Join(missing, ", "))
	}
	return out, nil
}
