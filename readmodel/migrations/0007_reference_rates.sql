-- A central bank's reference boards, one per source and day: a board
-- published again for a day replaces it (a correction). Kept apart from
-- the banks' tables: a reference source is never a bank, and retention
-- never drops a reference day (they are few and every premium needs one).
CREATE TABLE IF NOT EXISTS reference_boards (
    source TEXT NOT NULL,
    date DATE NOT NULL,
    event_id UUID NOT NULL,
    published_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (source, date)
);

CREATE TABLE IF NOT EXISTS reference_rates (
    source TEXT NOT NULL,
    date DATE NOT NULL,
    currency CHAR(3) NOT NULL,
    buying NUMERIC NOT NULL,
    selling NUMERIC NOT NULL,
    weighted_average NUMERIC NOT NULL,
    PRIMARY KEY (source, date, currency),
    FOREIGN KEY (source, date) REFERENCES reference_boards ON DELETE CASCADE
);
