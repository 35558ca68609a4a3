package faultproxy

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
)

// Transaction conflicts as DynamoDB has them. DynamoDB Local runs one
// request at a time, so two transactions never overlap there; on AWS a
// transaction that touches an item another request is writing is
// cancelled. A proxy built WithTransactionConflicts keeps the items of the
// writes it has forwarded and not yet answered ("in flight") and applies
// DynamoDB's rules to each new request:
//
//   - a TransactWriteItems or TransactGetItems that touches an item of an
//     in-flight transaction or of an in-flight write (PutItem, UpdateItem,
//     DeleteItem, BatchWriteItem) is cancelled: TransactionCanceledException
//     with TransactionConflict at the index of each such action and None
//     elsewhere;
//   - a PutItem, UpdateItem or DeleteItem on an item of an in-flight
//     transaction fails with TransactionConflictException.
//
// Neither is retried by the SDK's standard retryer, as on AWS: the caller
// decides. A BatchWriteItem is never refused (AWS would return the
// conflicting entries as unprocessed; here they wait on DynamoDB Local's
// lock instead), but its items are in flight for the others. Items are
// named by their table and key, the key's attributes learnt from the
// table's key schema (DescribeTable, cached per table and forgotten when
// CreateTable or DeleteTable passes the proxy). A request the proxy cannot
// read passes unchecked.

// WithTransactionConflicts makes a DynamoDB proxy cancel overlapping
// transactions and writes as DynamoDB does (see conflicts.go).
func WithTransactionConflicts() Option {
	return func(c *config) error {
		c.conflicts = true
		return nil
	}
}

type conflictTracker struct {
	schema func(ctx context.Context, table string, h http.Header) ([]string, error)

	schemaMu sync.Mutex
	schemas  map[string][]string

	mu     sync.Mutex
	inTx   map[string]int // item → in-flight transactions holding it
	inPut  map[string]int // item → in-flight single and batch writes
	active bool
}

func newConflictTracker(schema func(ctx context.Context, table string, h http.Header) ([]string, error)) *conflictTracker {
	return &conflictTracker{schema: schema, schemas: map[string][]string{}, inTx: map[string]int{}, inPut: map[string]int{}, active: true}
}

// SetTransactionConflicts turns the conflict rules on or off on a proxy
// built WithTransactionConflicts (on at first).
func (p *Proxy) SetTransactionConflicts(on bool) error {
	if p.conflicts == nil {
		return fmt.Errorf("%w: SetTransactionConflicts needs a proxy built WithTransactionConflicts", ErrBadOption)
	}
	p.conflicts.mu.Lock()
	p.conflicts.active = on
	p.conflicts.mu.Unlock()
	return nil
}

// itemAction is one action of a request on one item.
type itemAction struct {
	index int // in TransactItems; 0 otherwise
	item  string
}

// items lists the items a request writes or reads, by action.
func (c *conflictTracker) items(ctx context.Context, action string, body []byte, h http.Header) ([]itemAction, int, error) {
	var req struct {
		TableName     string
		Item          attributeMap
		Key           attributeMap
		RequestItems  map[string][]map[string]struct{ Item, Key attributeMap }
		TransactItems []map[string]struct {
			TableName string
			Item, Key attributeMap
		}
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, 0, fmt.Errorf("parse %s: %w", action, err)
	}
	var out []itemAction
	add := func(index int, table string, attrs attributeMap) error {
		id, err := c.itemID(ctx, table, attrs, h)
		if err != nil {
			return err
		}
		out = append(out, itemAction{index: index, item: id})
		return nil
	}
	switch action {
	case "PutItem":
		return out, 0, add(0, req.TableName, req.Item)
	case "UpdateItem", "DeleteItem":
		return out, 0, add(0, req.TableName, req.Key)
	case "BatchWriteItem":
		for table, entries := range req.RequestItems {
			for _, entry := range entries {
				for _, a := range entry {
					if err := add(0, table, a.Item); err != nil {
						return nil, 0, err
					}
					if err := add(0, table, a.Key); err != nil {
						return nil, 0, err
					}
				}
			}
		}
		return out, 0, nil
	case "TransactWriteItems", "TransactGetItems":
		for i, item := range req.TransactItems {
			for _, a := range item {
				attrs := a.Key
				if attrs == nil {
					attrs = a.Item
				}
				if err := add(i, a.TableName, attrs); err != nil {
					return nil, 0, err
				}
			}
		}
		return out, len(req.TransactItems), nil
	}
	return nil, 0, nil
}

// itemID names an item by its table and key values; "" when attrs is nil.
func (c *conflictTracker) itemID(ctx context.Context, table string, attrs attributeMap, h http.Header) (string, error) {
	if attrs == nil {
		return "", nil
	}
	c.schemaMu.Lock()
	names, ok := c.schemas[table]
	c.schemaMu.Unlock()
	if !ok {
		var err error
		if names, err = c.schema(ctx, table, h); err != nil {
			return "", fmt.Errorf("key schema of %s: %w", table, err)
		}
		c.schemaMu.Lock()
		c.schemas[table] = names
		c.schemaMu.Unlock()
	}
	var b strings.Builder
	b.WriteString(table)
	for _, n := range names {
		typ, value, ok := keyValue(attrs[n])
		if !ok {
			return "", fmt.Errorf("item of %s lacks its key attribute %s", table, n)
		}
		b.WriteString("\x00" + typ + "\x00" + value)
	}
	return b.String(), nil
}

func (c *conflictTracker) forget(table string) {
	c.schemaMu.Lock()
	delete(c.schemas, table)
	c.schemaMu.Unlock()
}

// admit applies the conflict rules to a request. It returns the error to
// answer, or a release to call once the request is answered.
func (p *Proxy) admitConflicts(r *http.Request, op Operation, body []byte) (release func(), refusal *awsError) {
	c := p.conflicts
	nothing := func() {}
	if c == nil || body == nil {
		return nothing, nil
	}
	switch op.Action {
	case "CreateTable", "DeleteTable":
		c.forget(op.Table)
		return nothing, nil
	case "PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems", "TransactGetItems":
	default:
		return nothing, nil
	}
	c.mu.Lock()
	active := c.active
	c.mu.Unlock()
	if !active {
		return nothing, nil
	}
	acts, n, err := c.items(r.Context(), op.Action, body, r.Header)
	if err != nil {
		p.logger.Debug("faultproxy: conflict check skips request", "action", op.Action, "err", err)
		return nothing, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	transact := op.Action == "TransactWriteItems" || op.Action == "TransactGetItems"
	var conflicting []int
	for i, a := range acts {
		if a.item == "" {
			continue
		}
		if c.inTx[a.item] > 0 || transact && c.inPut[a.item] > 0 {
			conflicting = append(conflicting, i)
		}
	}
	if len(conflicting) > 0 && op.Action != "BatchWriteItem" {
		if !transact {
			return nil, &awsError{status: http.StatusBadRequest, code: "TransactionConflictException", namespace: dynamoNamespace, sender: true,
				message: "Transaction is ongoing for the item"}
		}
		return nil, transactionCanceled(n, acts, conflicting)
	}
	if op.Action == "TransactGetItems" {
		return nothing, nil // reads hold nothing
	}
	held := c.inPut
	if op.Action == "TransactWriteItems" {
		held = c.inTx
	}
	for _, a := range acts {
		if a.item != "" {
			held[a.item]++
		}
	}
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, a := range acts {
			if a.item == "" {
				continue
			}
			if held[a.item]--; held[a.item] <= 0 {
				delete(held, a.item)
			}
		}
	}, nil
}

// transactionCanceled is DynamoDB's cancellation of a transaction of n
// actions: TransactionConflict for the conflicting ones, None for the rest.
func transactionCanceled(n int, acts []itemAction, conflicting []int) *awsError {
	reasons := make([]cancellationReason, n)
	codes := make([]string, n)
	for i := range reasons {
		reasons[i].Code = "None"
	}
	for _, i := range conflicting {
		reasons[acts[i].index] = cancellationReason{Code: "TransactionConflict", Message: "Transaction is ongoing for the item"}
	}
	for i, reason := range reasons {
		codes[i] = reason.Code
	}
	return &awsError{status: http.StatusBadRequest, code: "TransactionCanceledException", namespace: dynamoNamespace, sender: true,
		message:             "Transaction cancelled, please refer cancellation reasons for specific reasons [" + strings.Join(codes, ", ") + "]",
		cancellationReasons: reasons}
}
