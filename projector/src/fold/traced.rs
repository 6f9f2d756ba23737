//! The fold's spans for records that came with a trace context.
//!
//! A batch folds many records in one transaction, and each may belong to
//! another publisher's trace. Each traced record gets its own `fold` span,
//! a child of the producer's span (ingest's `publish`), open while the
//! batch's transaction runs: so each board's trace crosses ingest and the
//! projector as one trace, rather than the batch being one trace linked to
//! many. Its context goes with the record's crossings to the webhook calls
//! they cause. With traces off no record carries a context and nothing is
//! made.

use ratewire_alerts::evaluation::Evaluation;
use ratewire_proto::Envelope;
use ratewire_service::traces::TraceContext;

use super::Incoming;

/// One span per traced record in `events`, continuing the record's trace;
/// each span's context is given to `evaluation` for its crossings.
pub(super) fn spans(
    events: &[(&Incoming, &Envelope)],
    mut evaluation: Option<&mut Evaluation>,
) -> Vec<tracing::Span> {
    let mut spans = Vec::new();
    for (message, envelope) in events {
        let Some(trace) = &message.trace else {
            continue;
        };
        let span = tracing::info_span!(parent: None, "fold",
            partition = message.partition, offset = message.offset,
            event_id = %envelope.event_id, bank_id = %envelope.bank_id,
            event = envelope.event.type_name());
        trace.continue_in(&span);
        if let (Some(evaluation), Some(own)) = (evaluation.as_deref_mut(), TraceContext::of(&span))
        {
            evaluation.traced(envelope.event_id, own.traceparent);
        }
        spans.push(span);
    }
    spans
}
