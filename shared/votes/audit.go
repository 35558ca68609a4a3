package votes

import "sort"

// AuditLine compares one option of one poll: what the counters hold and
// what the archive holds (every month's ledger, each vote once).
type AuditLine struct {
	PollID   string `json:"pollId"`
	OptionID string `json:"optionId"`
	Counted  int64  `json:"counted"`
	Archived int64  `json:"archived"`
}

// Agrees reports whether the counters and the archive agree on the option.
func (l AuditLine) Agrees() bool { return l.Counted == l.Archived }

// Audit compares the counters' totals of the given polls with the votes
// the archive holds for them (poll → option → votes; polls missing from
// archived have none archived). Every option either side names gets a
// line, in poll then option order; differ counts the lines that disagree.
func Audit(counted []Totals, archived map[string]map[string]int64) (lines []AuditLine, differ int) {
	for _, t := range counted {
		options := map[string]bool{}
		for o := range t.Totals {
			options[o] = true
		}
		for o := range archived[t.PollID] {
			options[o] = true
		}
		ids := make([]string, 0, len(options))
		for o := range options {
			ids = append(ids, o)
		}
		sort.Strings(ids)
		for _, o := range ids {
			l := AuditLine{PollID: t.PollID, OptionID: o, Counted: t.Totals[o], Archived: archived[t.PollID][o]}
			if !l.Agrees() {
				differ++
			}
			lines = append(lines, l)
		}
	}
	sort.SliceStable(lines, func(i, j int) bool { return lines[i].PollID < lines[j].PollID })
	return lines, differ
}
