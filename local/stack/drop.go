package stack

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ddbpipe/ddbpipe/shared/platform/awsenv"
	"github.com/ddbpipe/ddbpipe/shared/platform/awserr"
)

// dropTables deletes the stack's tables (every name that starts with its
// stack name and a dash: the template's and the ledger's months) from
// servers it was given, which other stacks share: make test's. DynamoDB
// Local serves every request slower for each stream-enabled table it
// holds, and each test's stack leaves four to six of them.
func (e *Env) dropTables(ctx context.Context) error {
	vars := e.Servers.Vars()
	cfg, err := awsenv.FromVars(ctx, func(k string) string { return vars[k] })
	if err != nil {
		return fmt.Errorf("drop the stack's tables: %w", err)
	}
	c := awsenv.DynamoDB(cfg)
	prefix := strings.ToLower(e.stackName) + "-"
	var names []string
	for p := dynamodb.NewListTablesPaginator(c, &dynamodb.ListTablesInput{}); p.HasMorePages(); {
		page, err := p.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("drop the stack's tables: list: %w", err)
		}
		for _, n := range page.TableNames {
			if strings.HasPrefix(strings.ToLower(n), prefix) {
				names = append(names, n)
			}
		}
	}
	for _, n := range names {
		if err := dropTable(ctx, c, n); err != nil {
			return fmt.Errorf("drop the stack's table %s: %w", n, err)
		}
	}
	return nil
}

// dropTable deletes one table; a ledger month the rotator created is
// protected against deletion, which is turned off first.
func dropTable(ctx context.Context, c *dynamodb.Client, name string) error {
	_, err := c.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(name)})
	if awserr.Is(err, "ValidationException") && strings.Contains(err.Error(), "protected against deletion") {
		if _, err = c.UpdateTable(ctx, &dynamodb.UpdateTableInput{TableName: aws.String(name), DeletionProtectionEnabled: aws.Bool(false)}); err == nil {
			_, err = c.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(name)})
		}
	}
	if awserr.Is(err, "ResourceNotFoundException") {
		return nil
	}
	return err
}
