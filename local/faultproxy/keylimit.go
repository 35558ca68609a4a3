package faultproxy

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// The key limiter models DynamoDB's per-partition write throughput: a token
// bucket per (table, partition key value) refilled at the configured units
// per second, holding at most one second of them (the burst).
//
// Write units are approximated from the request, as AWS counts them from the
// stored item (1 unit per KB or part of one):
//
//   - PutItem and BatchWriteItem puts: the item's size by AWS's rules
//     (attribute names plus values; numbers 1 byte per 2 digits + 1; binary
//     decoded; lists and maps 3 bytes plus 1 per element);
//   - UpdateItem and DeleteItem: the request body's size, standing in for
//     the stored item (AWS charges the larger of the item before and after);
//   - BatchWriteItem deletes: the key's size (1 unit, as a rule);
//   - TransactWriteItems: twice the above per action (Put: the item; Update,
//     Delete, ConditionCheck: the action's JSON).
//
// A request is admitted only if every key it writes has the tokens for its
// share (a key asking for more than the burst is admitted when its bucket
// is full and goes into debt); otherwise nothing is debited and the request
// is refused: TransactWriteItems with TransactionCanceledException whose
// CancellationReasons hold ThrottlingError at the index of each action on an
// exhausted key and None elsewhere (the SDK does not retry it, as with AWS);
// every other write with ProvisionedThroughputExceededException, reason
// TableWriteKeyRangeThroughputExceeded. AWS answers a partly throttled
// BatchWriteItem with UnprocessedItems instead; the limiter refuses it whole.
//
// The partition key's attribute name is learnt from the table's key schema
// by a DescribeTable call to the upstream, made with the client's
// Authorization header (DynamoDB Local keeps one database per access key and
// region, and does not verify signatures), cached per table and forgotten
// when CreateTable or DeleteTable for the table passes the proxy. Requests
// the limiter cannot read, or for tables it cannot describe, pass unlimited.

// KeyStat is the write activity on one partition key.
type KeyStat struct {
	Table string
	// Key is the partition key's value (base64 for binary keys).
	Key string
	// Units is the write units asked for, admitted or not.
	Units float64
	// AdmittedUnits is the units of the writes admitted: what AWS would
	// bill (it does not bill throttled requests).
	AdmittedUnits float64
	// Writes counts the writes on the key (batch entries and transaction
	// actions each count), Throttled those refused because the key's bucket
	// was empty.
	Writes    int64
	Throttled int64
}

// minSweep is the number of tracked keys below which idle keys are kept.
const minSweep = 1 << 16

type keyState struct {
	KeyStat
	tokens float64
	last   time.Time
}

type describeFunc func(ctx context.Context, table string, h http.Header) (string, error)

type keyLimiter struct {
	rate     float64 // units per second; also the burst (guarded by mu)
	clock    Clock
	describe describeFunc

	schemaMu sync.Mutex
	pkNames  map[string]string

	mu      sync.Mutex
	keys    map[string]*keyState
	sweepAt int
}

func newKeyLimiter(rate float64, clock Clock, describe describeFunc) *keyLimiter {
	return &keyLimiter{
		rate:     rate,
		clock:    clock,
		describe: describe,
		pkNames:  make(map[string]string),
		keys:     make(map[string]*keyState),
		sweepAt:  minSweep,
	}
}

// keyWrite is one write of a request on one partition key.
type keyWrite struct {
	index int // the action's index in TransactItems, the entry's in a batch
	table string
	key   string
	id    string // table, key type and key value
	units float64
}

func isDynamoWrite(action string) bool {
	switch action {
	case "PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems":
		return true
	}
	return false
}

// limitKeys runs a DynamoDB write through the key limiter and returns the
// error to answer when it is refused.
func (p *Proxy) limitKeys(r *http.Request, op Operation, body []byte) (awsError, bool) {
	writes, actions, err := p.limiter.plan(r.Context(), op.Action, body, r.Header)
	if err != nil {
		p.logger.Debug("faultproxy: key limiter skips request", "action", op.Action, "err", err)
		return awsError{}, false
	}
	throttled := p.limiter.admit(writes)
	if throttled == nil {
		return awsError{}, false
	}
	if op.Action == "TransactWriteItems" {
		reasons := make([]cancellationReason, actions)
		codes := make([]string, actions)
		for i := range reasons {
			reasons[i].Code = "None"
		}
		for i, w := range writes {
			if throttled[i] {
				reasons[w.index] = cancellationReason{Code: "ThrottlingError", Message: hotKeyMessage}
			}
		}
		for i, reason := range reasons {
			codes[i] = reason.Code
		}
		return awsError{
			status: http.StatusBadRequest, code: "TransactionCanceledException", namespace: dynamoNamespace, sender: true,
			message:             "Transaction cancelled, please refer cancellation reasons for specific reasons [" + strings.Join(codes, ", ") + "]",
			cancellationReasons: reasons,
		}, true
	}
	table := ""
	for i, w := range writes {
		if throttled[i] {
			table = w.table
			break
		}
	}
	return awsError{
		status: http.StatusBadRequest, code: ProvisionedThroughputExceeded, namespace: dynamoNamespace, sender: true,
		message: hotKeyMessage,
		throttlingReasons: []throttlingReason{{
			Reason:   "TableWriteKeyRangeThroughputExceeded",
			Resource: tableARN(r, table),
		}},
	}, true
}

type attributeMap = map[string]any

// plan lists the writes of a DynamoDB write request and, for
// TransactWriteItems, its number of actions.
func (l *keyLimiter) plan(ctx context.Context, action string, body []byte, h http.Header) ([]keyWrite, int, error) {
	var req struct {
		TableName    string
		Item         attributeMap
		Key          attributeMap
		RequestItems map[string][]struct {
			PutRequest    *struct{ Item attributeMap }
			DeleteRequest *struct{ Key attributeMap }
		}
		TransactItems []map[string]json.RawMessage
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, 0, fmt.Errorf("parse %s: %w", action, err)
	}
	p := &keyPlan{l: l, ctx: ctx, h: h}
	switch action {
	case "PutItem":
		err := p.add(0, req.TableName, req.Item, writeUnits(itemSize(req.Item)))
		return p.writes, 0, err
	case "UpdateItem", "DeleteItem":
		err := p.add(0, req.TableName, req.Key, writeUnits(len(body)))
		return p.writes, 0, err
	case "BatchWriteItem":
		tables := make([]string, 0, len(req.RequestItems))
		for t := range req.RequestItems {
			tables = append(tables, t)
		}
		slices.Sort(tables)
		i := 0
		for _, t := range tables {
			for _, entry := range req.RequestItems[t] {
				var err error
				switch {
				case entry.PutRequest != nil:
					err = p.add(i, t, entry.PutRequest.Item, writeUnits(itemSize(entry.PutRequest.Item)))
				case entry.DeleteRequest != nil:
					err = p.add(i, t, entry.DeleteRequest.Key, writeUnits(itemSize(entry.DeleteRequest.Key)))
				}
				if err != nil {
					return nil, 0, err
				}
				i++
			}
		}
		return p.writes, 0, nil
	case "TransactWriteItems":
		if err := p.transact(req.TransactItems); err != nil {
			return nil, 0, err
		}
		return p.writes, len(req.TransactItems), nil
	}
	return nil, 0, nil
}

// keyPlan gathers the key writes of one request.
type keyPlan struct {
	l      *keyLimiter
	ctx    context.Context
	h      http.Header
	writes []keyWrite
}

// add plans a write of units to item's partition key in table.
func (p *keyPlan) add(index int, table string, item attributeMap, units float64) error {
	pk, err := p.l.partitionKey(p.ctx, table, p.h)
	if err != nil {
		return err
	}
	typ, value, ok := keyValue(item[pk])
	if !ok {
		// A malformed request (the upstream refuses it) or a table
		// recreated with another key schema: describe it again next time.
		p.l.forget(table)
		return nil
	}
	p.writes = append(p.writes, keyWrite{
		index: index,
		table: table,
		key:   value,
		id:    table + "\x00" + typ + "\x00" + value,
		units: units,
	})
	return nil
}

// transact plans a transaction's writes: each of its actions, at twice
// its units.
func (p *keyPlan) transact(items []map[string]json.RawMessage) error {
	for i, item := range items {
		for kind, raw := range item {
			var a struct {
				TableName string
				Item      attributeMap
				Key       attributeMap
			}
			if err := json.Unmarshal(raw, &a); err != nil {
				return fmt.Errorf("parse TransactItems[%d].%s: %w", i, kind, err)
			}
			var err error
			switch kind {
			case "Put":
				err = p.add(i, a.TableName, a.Item, 2*writeUnits(itemSize(a.Item)))
			case "Update", "Delete", "ConditionCheck":
				err = p.add(i, a.TableName, a.Key, 2*writeUnits(len(raw)))
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// admit debits every key of writes if all have the tokens, and returns nil;
// otherwise it debits nothing and returns, per write, whether its key was
// the one short of tokens.
func (l *keyLimiter) admit(writes []keyWrite) []bool {
	if len(writes) == 0 {
		return nil
	}
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()

	need := make(map[string]float64, len(writes))
	states := make(map[string]*keyState, len(writes))
	for _, w := range writes {
		need[w.id] += w.units
		if _, ok := states[w.id]; ok {
			continue
		}
		st, ok := l.keys[w.id]
		if !ok {
			st = &keyState{KeyStat: KeyStat{Table: w.table, Key: w.key}, tokens: l.rate, last: now}
			l.keys[w.id] = st
		}
		l.refill(st, now)
		states[w.id] = st
	}

	short := make(map[string]bool)
	for id, units := range need {
		st := states[id]
		if st.tokens < units && (units <= l.rate || st.tokens < l.rate) {
			short[id] = true
		}
	}

	var throttled []bool
	if len(short) > 0 {
		throttled = make([]bool, len(writes))
	}
	for i, w := range writes {
		st := states[w.id]
		st.Units += w.units
		st.Writes++
		switch {
		case short[w.id]:
			st.Throttled++
			throttled[i] = true
		case len(short) == 0:
			st.tokens -= w.units
			st.AdmittedUnits += w.units
		}
	}
	if len(l.keys) > l.sweepAt {
		l.sweep(now)
	}
	return throttled
}

// setRate changes the rate (and burst): buckets are refilled at the old
// rate up to now, then capped at the new burst.
func (l *keyLimiter) setRate(rate float64) {
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, st := range l.keys {
		l.refill(st, now)
		st.tokens = min(st.tokens, rate)
	}
	l.rate = rate
}

func (l *keyLimiter) refill(st *keyState, now time.Time) {
	if elapsed := now.Sub(st.last); elapsed > 0 {
		st.tokens = min(l.rate, st.tokens+l.rate*elapsed.Seconds())
		st.last = now
	}
}

// sweep forgets idle keys (full bucket, never throttled) so that the
// limiter's memory follows the hot keys, not every key ever written.
func (l *keyLimiter) sweep(now time.Time) {
	for id, st := range l.keys {
		l.refill(st, now)
		if st.tokens >= l.rate && st.Throttled == 0 {
			delete(l.keys, id)
		}
	}
	l.sweepAt = max(2*len(l.keys), minSweep)
}

func (l *keyLimiter) hotKeys() []KeyStat {
	l.mu.Lock()
	stats := make([]KeyStat, 0, len(l.keys))
	for _, st := range l.keys {
		stats = append(stats, st.KeyStat)
	}
	l.mu.Unlock()
	slices.SortFunc(stats, func(a, b KeyStat) int {
		return cmp.Or(cmp.Compare(b.Units, a.Units), cmp.Compare(a.Table, b.Table), cmp.Compare(a.Key, b.Key))
	})
	return stats
}

// partitionKey returns the name of table's partition key attribute.
func (l *keyLimiter) partitionKey(ctx context.Context, table string, h http.Header) (string, error) {
	if table == "" {
		return "", errors.New("no table name")
	}
	l.schemaMu.Lock()
	name, ok := l.pkNames[table]
	l.schemaMu.Unlock()
	if ok {
		return name, nil
	}
	name, err := l.describe(ctx, table, h)
	if err != nil {
		return "", fmt.Errorf("describe table %s: %w", table, err)
	}
	l.schemaMu.Lock()
	l.pkNames[table] = name
	l.schemaMu.Unlock()
	return name, nil
}

func (l *keyLimiter) forget(table string) {
	l.schemaMu.Lock()
	delete(l.pkNames, table)
	l.schemaMu.Unlock()
}

// describeTable asks the upstream for table's partition key attribute,
// with the client's credentials.
func (p *Proxy) describeTable(ctx context.Context, table string, h http.Header) (string, error) {
	names, err := p.keySchema(ctx, table, h)
	if err != nil {
		return "", err
	}
	return names[0], nil
}

// keySchema asks the upstream for table's key attributes, the partition
// key first, with the client's credentials.
func (p *Proxy) keySchema(ctx context.Context, table string, h http.Header) ([]string, error) {
	status, body, err := p.callTarget(ctx, h, dynamoTarget+"DescribeTable", struct{ TableName string }{table})
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("upstream status %d: %s", status, body[:min(len(body), 1024)])
	}
	var out struct {
		Table struct {
			KeySchema []struct{ AttributeName, KeyType string }
		}
	}
	if err := json.Unmarshal(body, &out); err != nil {
		return nil, fmt.Errorf("decode response: %w", err)
	}
	var hash, rng []string
	for _, k := range out.Table.KeySchema {
		switch k.KeyType {
		case "HASH":
			hash = append(hash, k.AttributeName)
		case "RANGE":
			rng = append(rng, k.AttributeName)
		}
	}
	if len(hash) != 1 {
		return nil, errors.New("no HASH key in key schema")
	}
	return append(hash, rng...), nil
}

// keyValue returns the type and value of a key attribute value
// ({"S":"abc"}, {"N":"12"}, {"B":"base64"}).
func keyValue(v any) (typ, value string, ok bool) {
	av, isMap := v.(map[string]any)
	if !isMap {
		return "", "", false
	}
	for _, t := range []string{"S", "N", "B"} {
		if s, isString := av[t].(string); isString {
			return t, s, true
		}
	}
	return "", "", false
}

// writeUnits is the write units of size bytes: 1 per KB or part of one.
func writeUnits(size int) float64 {
	return max(1, math.Ceil(float64(size)/1024))
}

// itemSize approximates the stored size of a DynamoDB item in JSON form.
func itemSize(item attributeMap) int {
	n := 0
	for name, v := range item {
		n += len(name) + attributeSize(v)
	}
	return n
}

func attributeSize(v any) int {
	av, ok := v.(map[string]any)
	if !ok {
		return 0
	}
	n := 0
	for typ, val := range av {
		switch typ {
		case "S":
			s, _ := val.(string)
			n += len(s)
		case "N":
			s, _ := val.(string)
			n += numberSize(s)
		case "B":
			s, _ := val.(string)
			n += binarySize(s)
		case "BOOL", "NULL":
			n++
		case "SS", "NS", "BS":
			list, _ := val.([]any)
			for _, e := range list {
				s, _ := e.(string)
				switch typ {
				case "SS":
					n += len(s)
				case "NS":
					n += numberSize(s)
				default:
					n += binarySize(s)
				}
			}
		case "L":
			list, _ := val.([]any)
			n += 3
			for _, e := range list {
				n += attributeSize(e) + 1
			}
		case "M":
			m, _ := val.(map[string]any)
			n += 3
			for name, e := range m {
				n += len(name) + attributeSize(e) + 1
			}
		}
	}
	return n
}

// numberSize is a number's size: 1 byte per two significant digits, plus 1.
func numberSize(s string) int {
	s = strings.TrimLeft(s, "+-")
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		s = s[:i]
	}
	s = strings.Replace(s, ".", "", 1)
	s = strings.Trim(s, "0")
	return (len(s)+1)/2 + 1
}

// binarySize is the decoded size of base64 s.
func binarySize(s string) int {
	n := base64.StdEncoding.DecodedLen(len(s))
	return max(0, n-strings.Count(s[max(0, len(s)-2):], "="))
}
