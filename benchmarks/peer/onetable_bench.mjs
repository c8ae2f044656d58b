// Count the requests OneTable (dynamodb-onetable) sends for the operations of dynaunique's
// round-trip table, against the same local server. Usage: node onetable_bench.mjs ENDPOINT
// Prints one JSON object: operation -> {requests: [{operation, written, read, wcu, rcu}], error}.
import { DynamoDBClient } from '@aws-sdk/client-dynamodb'
import { Table } from 'dynamodb-onetable'

const endpoint = process.argv[2]
const TABLE = 'bench_onetable'

const client = new DynamoDBClient({
    endpoint,
    region: 'us-east-1',
    credentials: { accessKeyId: 'testing', secretAccessKey: 'testing' },
    maxAttempts: 1,
})

// Every HTTP attempt passes the deserialize step once: count there, as it goes over the wire.
let sent = []
client.middlewareStack.add(
    (next) => async (args) => {
        const target = (args.request.headers['x-amz-target'] || '').split('.').pop()
        const raw = args.request.body || '{}'
        const body = JSON.parse(typeof raw === 'string' ? raw : new TextDecoder().decode(raw))
        sent.push(parse(target, body))
        return next(args)
    },
    { step: 'deserialize', name: 'countRequests' }
)

function parse(op, body) {
    if (op === 'TransactWriteItems') {
        const slots = body.TransactItems || []
        const checks = slots.filter((s) => s.ConditionCheck).length
        return { operation: op, written: slots.length - checks, read: 0, wcu: 2 * slots.length, rcu: 0 }
    }
    if (['PutItem', 'UpdateItem', 'DeleteItem'].includes(op)) {
        return { operation: op, written: 1, read: 0, wcu: 1, rcu: 0 }
    }
    if (op === 'GetItem') {
        return { operation: op, written: 0, read: 1, wcu: 0, rcu: body.ConsistentRead ? 1 : 0.5 }
    }
    return { operation: op, written: 0, read: 0, wcu: 0, rcu: 0 }
}

const schema = {
    format: 'onetable:1.1.0',
    version: '0.0.1',
    indexes: { primary: { hash: 'PK', sort: 'SK' } },
    models: {
        Account: {
            PK: { type: String, value: 'ACCT#${id}' },
            SK: { type: String, value: 'PROFILE' },
            id: { type: String, required: true },
            email: { type: String, unique: true },
            username: { type: String, unique: true },
            name: { type: String },
        },
    },
    params: { isoDates: true, timestamps: false },
}

const table = new Table({ client, name: TABLE, schema, partial: false, warn: false })
const Account = table.getModel('Account')

let n = 0
function values() {
    n += 1
    return { id: `ot${n}`, email: `ot${n}@example.com`, username: `otuser${n}`, name: 'n' }
}

async function created() {
    const v = values()
    await Account.create(v)
    return v
}

async function count(setup) {
    const operation = await setup()
    const start = sent.length
    let error = null
    try {
        await operation()
    } catch (err) {
        error = `${err.name || 'Error'}: ${String(err.message).split('\n')[0].slice(0, 160)}`
    }
    return { requests: sent.slice(start), error }
}

async function main() {
    if (await table.exists()) {
        await table.deleteTable('DeleteTableForever')
    }
    await table.createTable()
    const results = {}
    results.create = await count(async () => {
        const v = values()
        return () => Account.create(v)
    })
    results.update_unique = await count(async () => {
        const v = await created()
        return () => Account.update({ id: v.id, email: values().email }, { return: 'none' })
    })
    results.update_plain = await count(async () => {
        const v = await created()
        return () => Account.update({ id: v.id, name: 'renamed' })
    })
    // OneTable has no loaded objects: remove() always reads the prior item first.
    results.delete_loaded = await count(async () => {
        const v = await created()
        return () => Account.remove({ id: v.id })
    })
    results.delete_unloaded = results.delete_loaded
    results.swap = await count(async () => {
        const a = await created()
        const b = await created()
        return async () => {
            const transaction = {}
            await Account.update({ id: a.id, email: b.email }, { transaction })
            await Account.update({ id: b.id, email: a.email }, { transaction })
            await table.transact('write', transaction)
        }
    })
    process.stdout.write(JSON.stringify(results) + '\n')
}

main().catch((err) => {
    process.stderr.write(String(err && err.stack ? err.stack : err) + '\n')
    process.exit(1)
})
