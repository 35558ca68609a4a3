package faultproxy

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// Warm throughput, answered as AWS answers it. DynamoDB Local takes
// WarmThroughput on CreateTable and ignores it, reports none in
// DescribeTable, and refuses an UpdateTable that changes it alone
// ("Nothing to update"). With the table write limit on, the proxy keeps
// each table's warm throughput (tablelimit.go) and answers for it:
//
//   - DescribeTable's Table and UpdateTable's TableDescription carry
//     WarmThroughput: the table's warm write units, at least a new table's
//     (NewTableUnits, AWS: 4,000), and read units, at least a new table's
//     12,000; Status ACTIVE;
//   - an UpdateTable whose only change is WarmThroughput is answered by the
//     proxy with the table's description; DynamoDB does not lower a warm
//     throughput, and neither does the proxy.
//
// A reader such as the rotator then sees a table's warm throughput rise
// as it would on AWS, and the table's limit follows it.

const dynamoTarget = "DynamoDB_20120810."

// newTableReadUnits is a new on-demand table's warm read units on AWS.
const newTableReadUnits = 12000

// serveWarm answers DescribeTable and a warm-only UpdateTable when the
// table write limit is on; it reports whether it answered.
func (p *Proxy) serveWarm(w http.ResponseWriter, r *http.Request, op Operation, body []byte) bool {
	if p.tableLimit == nil || body == nil || r.Header.Get("X-Amz-Target") != dynamoTarget+op.Action {
		return false
	}
	var req map[string]json.RawMessage
	if json.Unmarshal(body, &req) != nil {
		return false
	}
	var table string
	if json.Unmarshal(req["TableName"], &table) != nil || table == "" {
		return false
	}
	field := "Table"
	switch op.Action {
	case "DescribeTable":
	case "UpdateTable":
		if _, warm := req["WarmThroughput"]; !warm || len(req) != 2 {
			return false // other changes go to DynamoDB Local (which refuses a warm field beside them)
		}
		field = "TableDescription"
	default:
		return false
	}
	p.count(op.Action, func(c *Counts) { c.Forwarded++ })
	status, answer, err := p.callTarget(r.Context(), r.Header, dynamoTarget+"DescribeTable", map[string]string{"TableName": table})
	if err != nil {
		if r.Context().Err() == nil {
			p.logger.Warn("faultproxy: warm throughput", "action", op.Action, "err", err)
			p.writeError(w, r, p.serverError(http.StatusBadGateway))
		}
		return true
	}
	if status != http.StatusOK {
		h := w.Header()
		h.Set("Content-Type", "application/x-amz-json-1.0")
		h.Set("Content-Length", strconv.Itoa(len(answer)))
		w.WriteHeader(status)
		_, _ = w.Write(answer)
		return true
	}
	if op.Action == "UpdateTable" {
		p.tableLimit.observe(op, body)
	}
	var out struct{ Table map[string]any }
	if err := json.Unmarshal(answer, &out); err != nil || out.Table == nil {
		p.writeError(w, r, p.serverError(http.StatusBadGateway))
		return true
	}
	read, write := p.tableLimit.warm(table)
	out.Table["WarmThroughput"] = map[string]any{"ReadUnitsPerSecond": read, "WriteUnitsPerSecond": write, "Status": "ACTIVE"}
	b, err := json.Marshal(map[string]any{field: out.Table})
	if err != nil {
		p.writeError(w, r, p.serverError(http.StatusInternalServerError))
		return true
	}
	writeJSON(w, b)
	return true
}

// warm is a table's warm throughput as DescribeTable reports it: what was
// asked for, at least a new table's.
func (l *tableLimiter) warm(table string) (read, write int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	read, write = newTableReadUnits, int64(l.cfg.NewTableUnits)
	if b, ok := l.tables[table]; ok {
		read, write = max(read, int64(b.warmRead)), max(write, int64(b.warm))
	}
	return read, write
}
