-- The W3C trace context of the fold that recorded a crossing, carried to
-- the messages made from it: a webhook call sends it as `traceparent`, so
-- a publisher's trace reaches the call its board caused. NULL when traces
-- are off or the board came without one.
ALTER TABLE crossings ADD COLUMN traceparent TEXT;
ALTER TABLE deliveries ADD COLUMN traceparent TEXT;
