//! Tree leases (`tree_leases`): which process instance runs which tree, until when (the database's
//! clock, [`DB_NOW`]), under which fencing token (`tree_lease_tokens`).
//!
//! A claim is one statement ([`claim`]), and never waits for another claimer or for a tree's
//! writers:
//! - a root with no lease: its task row is locked `FOR UPDATE SKIP LOCKED` (a second claimer skips
//!   it) and the lease is inserted `ON CONFLICT DO NOTHING`. A claimer whose snapshot predates a
//!   rival's commit can still lock the row after that commit; its insert then conflicts and takes
//!   nothing, and [`claim`] looks again with a new snapshot (a few times, then reports nothing: the
//!   next wake-up claims);
//! - a root whose lease expired: the *lease* row is locked `FOR UPDATE SKIP LOCKED`, not the task
//!   row. A lease row share-locked by a fenced write of the old owner is skipped (the write
//!   commits first, the next claim takes the tree), and holding the lease row before touching any
//!   task row is the order every fenced write takes its locks in (lease, then tasks), so a takeover
//!   and an old owner's write cannot deadlock. A heartbeat renewing the lease meanwhile waits for
//!   the claim, then finds the row no longer its instance's;
//! - the tree's live tasks are stamped with the claiming node (`tasks.node`), in the same
//!   statement.
//!
//! A takeover ([`Claimed::takeover`]) is a claim that replaced a lease, whoever held it: a node
//! that died, was paused past the lease and lost it, left (its leases were expired on the way out),
//! or gave the tree up without ending it (a write failed: the database was unreachable). In each,
//! what was in flight is unknown to the claimer, this same process included (its sessions for the
//! tree are gone). A root with no lease (new) is no takeover. Leases are only ever dropped when
//! their tree ended.
//!
//! Leases of ended trees are dropped by the owner's [`release`] and, for any owner (a node that
//! died before releasing), by every heartbeat ([`drop_ended`]), so the table holds about one row
//! per live tree.

use std::collections::HashMap;
use std::sync::OnceLock;

use deadpool_postgres::GenericClient;

use super::super::super::{Claimed, NodeIdentity, StoreError, TaskId, TaskState};
use super::super::sql::{Tx, exec, get, rows};
use super::DB_NOW;

/// How many times [`claim`] looks again after losing a root to a claimer that committed while it
/// looked (each look is a new snapshot, which sees that commit).
const CLAIM_LOOKS: usize = 3;

/// The claim statement: `$1` node, `$2` instance, `$3` lease length (ms), and with `one_root`,
/// `$4` the root. Returns the picked root, the instance of the lease it replaces (NULL: none), and
/// the new token (NULL: a rival claimed it first).
fn claim_sql(one_root: bool) -> &'static str {
    static ANY: OnceLock<String> = OnceLock::new();
    static ONE: OnceLock<String> = OnceLock::new();
    let cell = if one_root { &ONE } else { &ANY };
    cell.get_or_init(|| {
        let terminal = TaskState::terminal_sql();
        let (free_filter, expired_filter) = if one_root {
            ("AND t.id = $4", "AND l.root_id = $4")
        } else {
            ("", "")
        };
        format!(
            "WITH now AS MATERIALIZED (SELECT {DB_NOW} AS ms), \
             free AS ( \
                 SELECT t.id, NULL::BIGINT AS token, NULL::BIGINT AS instance FROM tasks t \
                 WHERE t.parent_id IS NULL AND t.state NOT IN {terminal} {free_filter} \
                 AND NOT EXISTS (SELECT 1 FROM tree_leases l WHERE l.root_id = t.id) \
                 ORDER BY t.id LIMIT 1 FOR UPDATE OF t SKIP LOCKED), \
             expired AS ( \
                 SELECT l.root_id AS id, l.token, l.instance \
                 FROM tree_leases l JOIN tasks t ON t.id = l.root_id \
                 WHERE l.expires_ms < (SELECT ms FROM now) AND t.state NOT IN {terminal} \
                 {expired_filter} \
                 ORDER BY l.root_id LIMIT 1 FOR UPDATE OF l SKIP LOCKED), \
             pick AS ( \
                 SELECT * FROM (SELECT * FROM free UNION ALL SELECT * FROM expired) p \
                 ORDER BY id LIMIT 1), \
             taken AS ( \
                 INSERT INTO tree_leases (root_id, node, instance, token, expires_ms) \
                 SELECT id, $1, $2, nextval('tree_lease_tokens'), (SELECT ms FROM now) + $3 \
                 FROM pick WHERE token IS NULL \
                 ON CONFLICT (root_id) DO NOTHING \
                 RETURNING root_id, token), \
             moved AS ( \
                 UPDATE tree_leases l SET node = $1, instance = $2, \
                 token = nextval('tree_lease_tokens'), expires_ms = (SELECT ms FROM now) + $3 \
                 FROM pick WHERE pick.token IS NOT NULL AND l.root_id = pick.id \
                 RETURNING l.root_id, l.token), \
             held AS (SELECT * FROM taken UNION ALL SELECT * FROM moved), \
             stamped AS ( \
                 UPDATE tasks SET node = $1 \
                 WHERE root_id IN (SELECT root_id FROM held) AND state NOT IN {terminal}) \
             SELECT pick.id, pick.instance, held.token FROM pick \
             LEFT JOIN held ON held.root_id = pick.id"
        )
    })
}

/// Claim the oldest tree that needs an owner (`root`: that tree only) for `node`, for `ttl_ms`
/// (see the module doc). `None`: nothing to claim, or every candidate was claimed by others while
/// this looked.
pub(super) async fn claim(
    c: &impl GenericClient,
    node: &NodeIdentity,
    ttl_ms: i64,
    root: Option<TaskId>,
) -> Result<Option<Claimed>, StoreError> {
    const DOING: &str = "claiming a tree";
    for _ in 0..CLAIM_LOOKS {
        let found = match root {
            None => {
                rows(
                    c,
                    DOING,
                    claim_sql(false),
                    &[&node.id, &node.instance, &ttl_ms],
                )
                .await?
            }
            Some(root) => {
                rows(
                    c,
                    DOING,
                    claim_sql(true),
                    &[&node.id, &node.instance, &ttl_ms, &root],
                )
                .await?
            }
        };
        let Some(row) = found.first() else {
            return Ok(None);
        };
        let picked: TaskId = get(row, 0, DOING)?;
        let before: Option<i64> = get(row, 1, DOING)?;
        let token: Option<i64> = get(row, 2, DOING)?;
        if let Some(token) = token {
            return Ok(Some(Claimed {
                root: picked,
                token,
                takeover: before.is_some(),
            }));
        }
    }
    Ok(None)
}

/// Renew the leases `instance` runs trees under (`running`: root and token), for `ttl_ms` from
/// now, and hand its other leases back (expired now: a tree this process no longer runs must not be
/// kept from the others by its heartbeat); the roots renewed. A lease that expired without anyone
/// taking it is renewed with its token, so its sessions keep writing.
pub(super) async fn renew(
    t: &Tx<'_>,
    instance: i64,
    ttl_ms: i64,
    running: &[(TaskId, i64)],
) -> Result<Vec<TaskId>, StoreError> {
    const DOING: &str = "renewing leases";
    let roots: Vec<TaskId> = running.iter().map(|(root, _)| *root).collect();
    let tokens: Vec<i64> = running.iter().map(|(_, token)| *token).collect();
    let mut held: Vec<TaskId> = rows(
        t.c(),
        DOING,
        &format!(
            "WITH running AS (SELECT * FROM unnest($3::BIGINT[], $4::BIGINT[]) AS r(root_id, token)) \
             UPDATE tree_leases l SET expires_ms = CASE WHEN EXISTS ( \
                 SELECT 1 FROM running r WHERE r.root_id = l.root_id AND r.token = l.token) \
               THEN {DB_NOW} + $2 ELSE 0 END \
             WHERE l.instance = $1 \
             RETURNING l.root_id, l.expires_ms > 0"
        ),
        &[&instance, &ttl_ms, &roots, &tokens],
    )
    .await?
    .iter()
    .filter_map(|r| match get::<bool>(r, 1, DOING) {
        Ok(true) => Some(get(r, 0, DOING)),
        Ok(false) => None,
        Err(e) => Some(Err(e)),
    })
    .collect::<Result<_, _>>()?;
    held.sort_unstable();
    Ok(held)
}

/// Drop the leases of trees that ended, whoever holds them. Rows locked by someone else (a write or
/// a release in flight) are skipped, never waited for: the next heartbeat drops them.
pub(super) async fn drop_ended(t: &Tx<'_>) -> Result<(), StoreError> {
    exec(
        t.c(),
        "dropping the leases of ended trees",
        &format!(
            "DELETE FROM tree_leases WHERE root_id IN ( \
             SELECT l.root_id FROM tree_leases l JOIN tasks t ON t.id = l.root_id \
             WHERE t.state IN {} FOR UPDATE OF l SKIP LOCKED)",
            TaskState::terminal_sql()
        ),
        &[],
    )
    .await?;
    Ok(())
}

/// Give up the lease on `root` if it still has `token` (a lease that moved on is another node's):
/// dropped when its tree ended, else expired now (the row stays, so the next claim is a takeover).
pub(super) async fn release(
    c: &impl GenericClient,
    root: TaskId,
    token: i64,
) -> Result<(), StoreError> {
    const DOING: &str = "releasing a tree";
    let terminal = TaskState::terminal_sql();
    exec(
        c,
        DOING,
        &format!(
            "WITH ended AS (DELETE FROM tree_leases WHERE root_id = $1 AND token = $2 \
               AND EXISTS (SELECT 1 FROM tasks WHERE id = $1 AND state IN {terminal}) RETURNING root_id) \
             UPDATE tree_leases SET expires_ms = 0 WHERE root_id = $1 AND token = $2 \
               AND NOT EXISTS (SELECT 1 FROM ended)"
        ),
        &[&root, &token],
    )
    .await?;
    Ok(())
}

/// Expire every lease `instance` holds (it leaves): any node may claim them at once. The rows stay,
/// so the next claim of each is a takeover.
pub(super) async fn hand_back(t: &Tx<'_>, instance: i64) -> Result<(), StoreError> {
    exec(
        t.c(),
        "handing the trees back",
        "UPDATE tree_leases SET expires_ms = 0 WHERE instance = $1",
        &[&instance],
    )
    .await?;
    Ok(())
}

/// The node holding an unexpired lease on each of `roots` that has one.
pub(super) async fn owners(
    c: &impl GenericClient,
    roots: &[TaskId],
) -> Result<HashMap<TaskId, String>, StoreError> {
    const DOING: &str = "reading the trees' owners";
    rows(
        c,
        DOING,
        &format!(
            "SELECT root_id, node FROM tree_leases WHERE root_id = ANY($1) AND expires_ms >= {DB_NOW}"
        ),
        &[&roots],
    )
    .await?
    .iter()
    .map(|r| Ok((get(r, 0, DOING)?, get(r, 1, DOING)?)))
    .collect()
}
