package stack_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ddbpipe/ddbpipe/local/registry"
	"github.com/ddbpipe/ddbpipe/local/servers/stacktest"
	"github.com/ddbpipe/ddbpipe/local/stack"
	"github.com/ddbpipe/ddbpipe/shared/platform/awsenv"
)

// TestCloseDropsTheTablesOfAStackOnSharedServers: a stack on servers it
// was given drops its tables when it closes (make test's servers would
// otherwise gather hundreds of stream-enabled tables), and only its own;
// with KeepTables it leaves them.
func TestCloseDropsTheTablesOfAStackOnSharedServers(t *testing.T) {
	st := stacktest.Need(t)
	ctx := context.Background()
	c := awsenv.DynamoDB(stacktest.Config(t, st, nil))
	tables := func(prefix string) []string {
		t.Helper()
		var names []string
		for p := dynamodb.NewListTablesPaginator(c, &dynamodb.ListTablesInput{}); p.HasMorePages(); {
			page, err := p.NextPage(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range page.TableNames {
				if strings.HasPrefix(n, prefix+"-") {
					names = append(names, n)
				}
			}
		}
		return names
	}
	up := func(name string, keep bool) *stack.Env {
		t.Helper()
		env, err := stack.Up(ctx, stack.Options{
			Root: repoRoot(t), Servers: st, Setups: registry.All, NoRotation: true, NoIAM: true,
			StackName: name, StateDir: t.TempDir(), KeepTables: keep,
		})
		if err != nil {
			t.Fatal(err)
		}
		return env
	}
	base := fmt.Sprintf("drop-%d-%d", time.Now().UnixNano()%1e6, seq.Add(1))
	// "<base>" and "<base>1": the second's name starts with the first's,
	// and its tables must outlive the first's Close.
	kept, dropped := up(base+"1", true), up(base, false)
	// A month of the ledger, as the rotator creates it: protected
	// against deletion.
	if _, err := c.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:                 aws.String(base + "-votes-2026-01"),
		AttributeDefinitions:      []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:                 []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
		BillingMode:               types.BillingModePayPerRequest,
		DeletionProtectionEnabled: aws.Bool(true),
	}); err != nil {
		t.Fatal(err)
	}
	ours, theirs := tables(base), tables(base+"1")
	if len(ours) == 0 || len(theirs) == 0 {
		t.Fatalf("before Close: %v and %v, want each stack's own tables", ours, theirs)
	}
	if err := dropped.Close(); err != nil {
		t.Fatal(err)
	}
	if left := tables(base); len(left) != 0 {
		t.Errorf("after Close: %v left, want the stack's tables dropped", left)
	}
	if err := kept.Close(); err != nil {
		t.Fatal(err)
	}
	if left := tables(base + "1"); !slices.Equal(left, theirs) {
		t.Errorf("with KeepTables, after Close: %v, want %v", left, theirs)
	}
	for _, n := range theirs {
		if _, err := c.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: &n}); err != nil {
			t.Error(err)
		}
	}
}
