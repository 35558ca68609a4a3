package faultproxy

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
)

// A new on-demand table's write limit, as AWS has it. A new on-demand table
// takes 4,000 write units a second at once, or its warm throughput when it
// was created (or raised) with a higher one; above that it throttles until
// DynamoDB scales it. DynamoDB Local has no such limit and ignores warm
// throughput. A proxy built WithTableWriteLimit keeps a token bucket per
// table (a second's worth of burst) refilled at the table's limit:
//
//	limit = Scale × max(NewTableUnits, the table's warm write throughput)
//
// where the warm value is read from the CreateTable and UpdateTable
// requests that pass the proxy (WarmThroughput.WriteUnitsPerSecond), and
// Scale shrinks AWS's figures to what one machine serves. Writes are
// counted in write units as the key limiter counts them (keylimit.go); a
// write the bucket cannot cover is refused with
// ProvisionedThroughputExceededException (TableWriteProvisionedThroughputExceeded),
// a transaction with TransactionCanceledException (ThrottlingError).
// SetTableWriteLimit overrides a table's limit on a running proxy. The
// scaling DynamoDB does on its own (twice the previous peak within 30
// minutes) is not modelled: a table keeps its limit.

// TableWriteLimit configures WithTableWriteLimit.
type TableWriteLimit struct {
	// NewTableUnits is a new on-demand table's write units a second
	// before scaling (AWS: 4,000; default).
	NewTableUnits float64
	// Scale multiplies every limit (default 1): 0.025 makes a new table
	// take 100 units a second.
	Scale float64
	// Match limits the tables limited (nil: every table).
	Match func(table string) bool
}

// WithTableWriteLimit turns on the table-level write limit.
func WithTableWriteLimit(l TableWriteLimit) Option {
	return func(c *config) error {
		if l.NewTableUnits < 0 || l.Scale < 0 {
			return fmt.Errorf("%w: table write limit %+v is negative", ErrBadOption, l)
		}
		if l.NewTableUnits == 0 {
			l.NewTableUnits = 4000
		}
		if l.Scale == 0 {
			l.Scale = 1
		}
		c.tableLimit = &l
		return nil
	}
}

type tableBucket struct {
	warm     float64 // warm write units/s asked for, AWS's figure
	warmRead float64 // warm read units/s asked for (reported, not limited)
	override float64 // SetTableWriteLimit's, already scaled; 0 for none
	tokens   float64
	last     time.Time
	// Stats.
	units, admitted float64
	throttled       int64
}

type tableLimiter struct {
	cfg   TableWriteLimit
	clock Clock

	mu     sync.Mutex
	tables map[string]*tableBucket
}

func newTableLimiter(cfg TableWriteLimit, clock Clock) *tableLimiter {
	return &tableLimiter{cfg: cfg, clock: clock, tables: map[string]*tableBucket{}}
}

// TableStat is a table's write activity under the table limit.
type TableStat struct {
	Table string
	// Limit is the table's write units a second now.
	Limit float64
	// Units asked for; AdmittedUnits those admitted; Throttled the writes
	// refused.
	Units, AdmittedUnits float64
	Throttled            int64
}

func (l *tableLimiter) rate(b *tableBucket) float64 {
	if b.override > 0 {
		return b.override
	}
	return l.cfg.Scale * max(l.cfg.NewTableUnits, b.warm)
}

func (l *tableLimiter) bucket(table string, now time.Time) *tableBucket {
	b, ok := l.tables[table]
	if !ok {
		b = &tableBucket{last: now}
		l.tables[table] = b
		b.tokens = l.rate(b)
	}
	if elapsed := now.Sub(b.last); elapsed > 0 {
		b.tokens = min(l.rate(b), b.tokens+l.rate(b)*elapsed.Seconds())
		b.last = now
	}
	return b
}

// observe learns warm throughput from CreateTable and UpdateTable, and
// forgets a deleted table.
func (l *tableLimiter) observe(op Operation, body []byte) {
	switch op.Action {
	case "CreateTable", "UpdateTable":
		var req struct {
			TableName      string
			WarmThroughput *struct{ ReadUnitsPerSecond, WriteUnitsPerSecond float64 }
		}
		if json.Unmarshal(body, &req) != nil || req.TableName == "" {
			return
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		b := l.bucket(req.TableName, l.clock.Now())
		if op.Action == "CreateTable" {
			*b = tableBucket{last: b.last, override: b.override}
		}
		if wt := req.WarmThroughput; wt != nil {
			b.warm = max(b.warm, wt.WriteUnitsPerSecond)
			b.warmRead = max(b.warmRead, wt.ReadUnitsPerSecond)
		}
		b.tokens = l.rate(b)
	case "DeleteTable":
		l.mu.Lock()
		delete(l.tables, op.Table)
		l.mu.Unlock()
	}
}

// tableUnits are the write units a request asks of each table.
func tableUnits(action string, body []byte) map[string]float64 {
	var req struct {
		TableName    string
		Item         attributeMap
		RequestItems map[string][]struct {
			PutRequest    *struct{ Item attributeMap }
			DeleteRequest *struct{ Key attributeMap }
		}
		TransactItems []map[string]json.RawMessage
	}
	if json.Unmarshal(body, &req) != nil {
		return nil
	}
	out := map[string]float64{}
	switch action {
	case "PutItem":
		out[req.TableName] += writeUnits(itemSize(req.Item))
	case "UpdateItem", "DeleteItem":
		out[req.TableName] += writeUnits(len(body))
	case "BatchWriteItem":
		for t, entries := range req.RequestItems {
			for _, e := range entries {
				switch {
				case e.PutRequest != nil:
					out[t] += writeUnits(itemSize(e.PutRequest.Item))
				case e.DeleteRequest != nil:
					out[t] += writeUnits(itemSize(e.DeleteRequest.Key))
				}
			}
		}
	case "TransactWriteItems":
		for _, item := range req.TransactItems {
			for kind, raw := range item {
				var a struct {
					TableName string
					Item      attributeMap
				}
				if json.Unmarshal(raw, &a) != nil {
					continue
				}
				if kind == "Put" {
					out[a.TableName] += 2 * writeUnits(itemSize(a.Item))
				} else {
					out[a.TableName] += 2 * writeUnits(len(raw))
				}
			}
		}
	}
	return out
}

// limitTables admits a write if every table it writes has the units, and
// returns the refusal otherwise.
func (p *Proxy) limitTables(r *http.Request, op Operation, body []byte) (awsError, bool) {
	l := p.tableLimit
	need := tableUnits(op.Action, body)
	now := l.clock.Now()
	l.mu.Lock()
	var short string
	buckets := map[string]*tableBucket{}
	for t, units := range need {
		if t == "" || l.cfg.Match != nil && !l.cfg.Match(t) {
			continue
		}
		b := l.bucket(t, now)
		buckets[t] = b
		b.units += units
		if b.tokens < units && (units <= l.rate(b) || b.tokens < l.rate(b)) {
			short = t
		}
	}
	for t, b := range buckets {
		if short != "" {
			if t == short {
				b.throttled++
			}
			continue
		}
		b.tokens -= need[t]
		b.admitted += need[t]
	}
	l.mu.Unlock()
	if short == "" {
		return awsError{}, false
	}
	if op.Action == "TransactWriteItems" {
		var req struct{ TransactItems []json.RawMessage }
		_ = json.Unmarshal(body, &req)
		reasons := make([]cancellationReason, len(req.TransactItems))
		codes := make([]string, len(reasons))
		for i := range reasons {
			reasons[i] = cancellationReason{Code: "ThrottlingError", Message: "Throughput exceeds the current capacity of your table or index."}
			codes[i] = reasons[i].Code
		}
		return awsError{status: http.StatusBadRequest, code: "TransactionCanceledException", namespace: dynamoNamespace, sender: true,
			message:             "Transaction cancelled, please refer cancellation reasons for specific reasons [" + strings.Join(codes, ", ") + "]",
			cancellationReasons: reasons}, true
	}
	return awsError{
		status: http.StatusBadRequest, code: ProvisionedThroughputExceeded, namespace: dynamoNamespace, sender: true,
		message:           "Throughput exceeds the current capacity of your table or index. DynamoDB is automatically scaling your table or index so please try again shortly.",
		throttlingReasons: []throttlingReason{{Reason: "TableWriteProvisionedThroughputExceeded", Resource: tableARN(r, short)}},
	}, true
}

// SetTableWriteLimit sets table's write units a second on a running proxy
// (already scaled; 0 goes back to the table's own limit). It fails with
// ErrBadOption when the proxy was built without WithTableWriteLimit.
func (p *Proxy) SetTableWriteLimit(table string, unitsPerSecond float64) error {
	if p.tableLimit == nil {
		return fmt.Errorf("%w: SetTableWriteLimit needs a proxy built WithTableWriteLimit", ErrBadOption)
	}
	l := p.tableLimit
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.bucket(table, l.clock.Now())
	b.override = max(unitsPerSecond, 0)
	b.tokens = min(b.tokens, l.rate(b))
	return nil
}

// TableStats returns each limited table's write activity.
func (p *Proxy) TableStats() []TableStat {
	if p.tableLimit == nil {
		return nil
	}
	l := p.tableLimit
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []TableStat
	for t, b := range l.tables {
		out = append(out, TableStat{Table: t, Limit: l.rate(b), Units: b.units, AdmittedUnits: b.admitted, Throttled: b.throttled})
	}
	return out
}
