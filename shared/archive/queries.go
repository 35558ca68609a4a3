package archive

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// NamedQuery is an analyst's question about the archive, as SQL that runs
// unchanged in Athena (Trino) and in DuckDB (`ddbpipe archive query -named`).
// template.yaml's AWS::Athena::NamedQuery resources carry the same text (a
// test compares them), so the two cannot drift.
//
// The SQL names what differs between the two places with CloudFormation
// !Sub variables, filled by the template in AWS and by Expand locally:
//
//	${ArchiveTable}   the table over every partition: the Glue table in
//	                  Athena, the view "archive" in DuckDB
//	${VotesTable}     the vote ledgers' base name ("<stack>-votes")
//	${ObjectsTable}   the objects table's name ("<stack>-objects")
//
// A "?" is a parameter, given at run time (Athena's execution parameters,
// DuckDB's prepared statements). The SQL keeps to what both engines share:
// json_extract_scalar (DuckDB gets it as a macro), date_trunc on the
// timestamp column (a plain UTC timestamp in both), lpad to order sequence
// numbers, and "table" quoted because it is a reserved word.
type NamedQuery struct {
	Name        string // kebab-case, as `-named` takes it
	Description string
	Params      []string // what each "?" stands for, in order
	SQL         string
}

// NamedQueries are the archive's named queries, in a stable order.
var NamedQueries = []NamedQuery{
	{
		Name:        "votes-per-poll-per-day",
		Description: "Votes recorded per poll and option per UTC day, from the monthly ledgers.",
		SQL: `SELECT json_extract_scalar(newImage, '$.pollId') AS poll,
       json_extract_scalar(newImage, '$.optionId') AS option,
       CAST(date_trunc('day', approximateCreationTime) AS DATE) AS day,
       count(*) AS votes
FROM ${ArchiveTable}
WHERE "table" = '${VotesTable}' AND eventName = 'INSERT'
GROUP BY 1, 2, 3
ORDER BY day, poll, option
`,
	},
	{
		Name:        "voter-history",
		Description: "Every vote one voter cast, oldest first.",
		Params:      []string{"voter id"},
		SQL: `SELECT approximateCreationTime AS recorded,
       json_extract_scalar(newImage, '$.pollId') AS poll,
       json_extract_scalar(newImage, '$.optionId') AS option,
       json_extract_scalar(newImage, '$.voteId') AS vote,
       month
FROM ${ArchiveTable}
WHERE "table" = '${VotesTable}' AND eventName = 'INSERT'
  AND json_extract_scalar(newImage, '$.voterId') = ?
ORDER BY recorded, lpad(sequenceNumber, 40, '0')
`,
	},
	{
		Name:        "object-changes",
		Description: "Every change to one object's items (its versions and head), in stream order.",
		Params:      []string{"object key"},
		SQL: `SELECT approximateCreationTime AS recorded,
       eventName AS event,
       json_extract_scalar(keys, '$.sk') AS item,
       ttlDelete,
       newImage,
       oldImage
FROM ${ArchiveTable}
WHERE "table" = '${ObjectsTable}' AND json_extract_scalar(keys, '$.pk') = ?
ORDER BY lpad(sequenceNumber, 40, '0')
`,
	},
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
	return NamedQuery{}, fmt.Errorf("archive: no named query %q (there are: %s)", name, strings.Join(names, ", "))
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
