//! What people do besides chatting: click an approval card's button, or type a slash command.
//!
//! Invariants: only approvers decide approvals and cancel trees (the global approvers plus the
//! agent's own; on the web chat, the operator); an approval is decided once (the engine's
//! transaction), and a late click is told who decided. Answers go to the person who acted only.

use std::sync::Arc;

use opc_adapters::{Action, Adapter, Command, Inbound, Platform, Posted, User};
use opc_agents::store::{Decided, TaskId};
use opc_hierarchy::Config;
use opc_hierarchy::schema::Approver;

use super::Gateway;
use super::commands;

impl Gateway {
    /// Whether `user` may decide for `agent` (or, for the root agent, cancel its trees): one of its
    /// approvers ([`approvers`]). On the web chat the operator decides: it is bound to loopback or
    /// guarded by an access token, like the terminal `opc chat` is.
    pub(super) fn is_approver(&self, user: &User, platform: Platform, agent: &str) -> bool {
        if platform == Platform::Web {
            return true;
        }
        let loaded = self.inner.live.get();
        approvers(&loaded.config, agent).any(|approver| approver_matches(approver, platform, user))
    }

    /// Who may decide for `agent`, as the refusal names them: `platform:id` or `platform:role:id`.
    fn approvers_of(&self, agent: &str) -> Vec<String> {
        let loaded = self.inner.live.get();
        approvers(&loaded.config, agent)
            .map(|a| {
                format!(
                    "{}:{}{}",
                    a.platform.as_str(),
                    if a.is_role { "role:" } else { "" },
                    a.id
                )
            })
            .collect()
    }

    pub(super) async fn on_action(
        &self,
        adapter: Arc<dyn Adapter>,
        inbound: Inbound,
        action: Action,
        _card: Posted,
    ) {
        let Action::Decide { approval, option } = action;
        let engine = &self.inner.engine;
        let record = match engine.store().approval(approval).await {
            Ok(Some(record)) => record,
            Ok(None) => {
                self.respond(
                    &adapter,
                    &inbound,
                    format!("Approval #{approval} does not exist."),
                );
                return;
            }
            Err(e) => {
                tracing::error!(error = %e, "approval lookup failed");
                self.respond(
                    &adapter,
                    &inbound,
                    "OPC could not read its database; please try again.".into(),
                );
                return;
            }
        };
        let platform = inbound.place.platform;
        if !self.is_approver(&inbound.user, platform, &record.agent) {
            tracing::info!(%platform, approval, "approval refused: not an approver");
            let approvers = self.approvers_of(&record.agent);
            let who = if approvers.is_empty() {
                "No approvers are configured for this agent; an admin can add them under \
                 `gateway.approvers` or the agent's `approvers` in opc.config.yaml."
                    .to_string()
            } else {
                format!("Approvers: {}.", approvers.join(", "))
            };
            self.respond(
                &adapter,
                &inbound,
                format!(
                    "Only approvers can decide approval #{approval} for **{}**. {who}",
                    record.agent
                ),
            );
            return;
        }
        let Some(choice) = record.options.get(option).map(|o| o.label.clone()) else {
            self.respond(
                &adapter,
                &inbound,
                format!("That button is not an option of approval #{approval}."),
            );
            return;
        };
        let by = format!("{} ({platform}:{})", inbound.user.name, inbound.user.id);
        let answer = match engine.decide(approval, &choice, &by).await {
            // The card itself is redrawn with the decision and who made it (cards.rs, on the
            // engine's `approval_resolved`), on every platform it was posted to: a notice saying
            // the same again would only repeat it.
            Ok(Decided::Recorded(_)) => {
                tracing::info!(%platform, approval, "approval decided");
                return;
            }
            Ok(Decided::AlreadyDecided(done)) | Ok(Decided::Expired(done)) => format!(
                "Approval #{approval} was already decided: **{}**.",
                done.decision_text().unwrap_or_default()
            ),
            Ok(Decided::NotFound) => format!("Approval #{approval} does not exist."),
            Err(e) => format!("Could not record that: {e}"),
        };
        self.respond(&adapter, &inbound, answer);
    }

    pub(super) async fn on_command(
        &self,
        adapter: Arc<dyn Adapter>,
        inbound: Inbound,
        command: Command,
    ) {
        let engine = &self.inner.engine;
        let text = match command {
            Command::Status => commands::status(engine.store(), inbound.place.platform).await,
            Command::Agents => commands::agents(&engine.org()),
            Command::Tasks => commands::tasks(engine.store()).await,
            Command::Help => commands::help(inbound.place.platform, None),
            Command::Unknown(what) => commands::help(inbound.place.platform, Some(&what)),
            Command::Cancel(arg) => self.cancel(&inbound, &arg).await,
        };
        self.respond(&adapter, &inbound, text);
    }

    async fn cancel(&self, inbound: &Inbound, arg: &str) -> String {
        let engine = &self.inner.engine;
        let root = engine.org().root().to_string();
        if !self.is_approver(&inbound.user, inbound.place.platform, &root) {
            return "Only approvers can cancel tasks.".into();
        }
        let Ok(task) = arg.trim().trim_start_matches('#').parse::<TaskId>() else {
            return format!(
                "`/cancel` needs a task id, e.g. `/cancel 12` (see `/status`); `{}` is not one.",
                arg.trim()
            );
        };
        match engine.store().task(task).await {
            Ok(record) if record.state.is_terminal() => {
                format!(
                    "Task #{task} has already ended ({}).",
                    record.state.as_str()
                )
            }
            Ok(_) => match engine.cancel(task).await {
                Ok(cancelled) => format!(
                    "Cancelled task #{task} ({} task{} in its tree).",
                    cancelled.len(),
                    if cancelled.len() == 1 { "" } else { "s" }
                ),
                Err(e) => format!("Could not cancel task #{task}: {e}"),
            },
            Err(_) => format!("There is no task #{task}; `/status` lists the running ones."),
        }
    }
}

/// The approvers of `agent`: the global ones (`gateway.approvers`), then the agent's own. The one
/// walk of the chain, so who may decide and who a refusal names cannot disagree.
fn approvers<'a>(config: &'a Config, agent: &str) -> impl Iterator<Item = &'a Approver> {
    let own = config
        .agents
        .get(agent)
        .map(|a| a.approvers.as_slice())
        .unwrap_or_default();
    config.gateway.approvers.iter().chain(own)
}

fn approver_matches(approver: &Approver, platform: Platform, user: &User) -> bool {
    approver.platform.as_str() == platform.as_str()
        && if approver.is_role {
            user.roles.contains(&approver.id)
        } else {
            user.id == approver.id
        }
}
