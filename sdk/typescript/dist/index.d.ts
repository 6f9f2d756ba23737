import type { components } from './schema.js';
export type Schemas = components['schemas'];
export type Bank = Schemas['Bank'];
export type RatesBank = Schemas['RatesBank'];
export type Currency = Schemas['Currency'];
export type BestRates = Schemas['BestRates'];
export type HistoryRecord = Schemas['HistoryRecord'];
export type Alert = Schemas['Alert'];
export type CreatedWebhook = Schemas['CreatedWebhook'];
export type Webhook = Schemas['Webhook'];
export type Conversion = Schemas['Conversion'];
export type Spreads = Schemas['Spreads'];
export type ReferenceRate = Schemas['ReferenceRate'];
export type SeriesPoint = Schemas['BankSeriesPoint'] | Schemas['BestSeriesPoint'];
export type Board = Schemas['Board'];
export type Revision = Schemas['Revision'];
export type Quality = Schemas['Quality'];
/** An instant for `asKnownAt` and its kin: a Date or RFC 3339 text. */
export type Instant = Date | string;
/** A read as it was known at an instant: the answer the API gave then. */
export interface KnownAt {
    asKnownAt?: Instant;
}
export interface ClientOptions {
    baseUrl: string;
    apiKey?: string;
    /** Wait out a 429's Retry-After and try again, up to this many times (default 0). */
    retryRateLimited?: number;
    fetch?: typeof fetch;
}
/** Any answer that is not a success: its status, message, and for a 400 the bad parameters. */
export declare class RatewireError extends Error {
    readonly status: number;
    readonly errors: Record<string, string[]>;
    readonly retryAfter: number | null;
    readonly body: unknown;
    constructor(status: number, message: string, errors?: Record<string, string[]>, retryAfter?: number | null, body?: unknown);
}
export interface StreamEvent {
    event: string;
    id: string | null;
    data: unknown;
}
export declare class RatewireClient {
    private readonly baseUrl;
    private readonly headers;
    private readonly retries;
    private readonly fetch;
    readonly webhooks: {
        create: (body: {
            url: string;
            description?: string;
            events?: string[];
        }) => Promise<{
            createdAt: string;
            description?: string | null;
            events: components["schemas"]["WatchdogEvent"][];
            id: string;
            secret: string;
            url: string;
        }>;
        list: () => Promise<{
            createdAt: string;
            description?: string | null;
            disabledAt?: string | null;
            events: components["schemas"]["WatchdogEvent"][];
            failingSince?: string | null;
            id: string;
            lastError?: string | null;
            lastErrorAt?: string | null;
            lastSuccessAt?: string | null;
            pending: number;
            previousSecretUntil?: string | null;
            status: string;
            url: string;
        }[]>;
        delete: (id: string) => Promise<undefined>;
    };
    readonly alerts: {
        create: (body: Schemas["NewAlert"]) => Promise<{
            bankId?: number | null;
            condition: string;
            createdAt: string;
            currencyCode: string;
            field: string;
            fired: number;
            id: string;
            lastFiredAt?: string | null;
            lastValue?: number | null;
            threshold: number;
            triggered?: boolean | null;
            webhookId: string;
        }>;
        list: () => Promise<{
            bankId?: number | null;
            condition: string;
            createdAt: string;
            currencyCode: string;
            field: string;
            fired: number;
            id: string;
            lastFiredAt?: string | null;
            lastValue?: number | null;
            threshold: number;
            triggered?: boolean | null;
            webhookId: string;
        }[]>;
        delete: (id: string) => Promise<undefined>;
    };
    constructor(options: ClientOptions);
    private send;
    private data;
    banks(options?: {
        withRecent?: boolean;
    }): Promise<Bank[]>;
    currencies(): Promise<Currency[]>;
    /** The banks' latest boards (api-v1's nested envelopes, flattened). */
    rates(options?: {
        bankId?: number;
        transactional?: boolean;
        socialLinks?: boolean;
    } & KnownAt): Promise<RatesBank[]>;
    bestRates(currencyCode: string, options?: KnownAt): Promise<BestRates>;
    history(options: {
        bankId: number;
        date: string;
        currencyCode?: string;
    } & KnownAt): Promise<HistoryRecord>;
    /** Every point of the range, following `next` page after page. */
    series(options?: {
        bankId?: number;
        currencyCode?: string;
        interval?: 'raw' | 'hour' | 'day';
        from?: string;
        to?: string;
        field?: string;
    } & KnownAt): AsyncGenerator<SeriesPoint>;
    /** Each page's `key` items, following `next` until it is null. */
    private pages;
    /** `amount` of `from` in `to` at each bank's rate (or one bank's), through birr. */
    convert(options: {
        amount: number | string;
        from: string;
        to: string;
        bankId?: number;
        transactional?: boolean;
    } & KnownAt): Promise<Conversion>;
    /** Each bank's spread for a currency, beside the National Bank's reference. */
    spreads(currencyCode: string, options?: {
        transactional?: boolean;
    } & KnownAt): Promise<Spreads>;
    /** The National Bank's reference: one currency's, or every currency's. */
    referenceRates(options: {
        currencyCode: string;
        date?: string;
    } & KnownAt): Promise<ReferenceRate>;
    referenceRates(options?: {
        date?: string;
    } & KnownAt): Promise<ReferenceRate[]>;
    /** A published board and where it came from: received and acknowledged when, its place in the log, its source, what revised it. */
    board(eventId: string): Promise<Board>;
    /** The bank's board for `asOf`, with its provenance: a rate's `updatedAt` names the board it came from. */
    boardAt(options: {
        bankId: number;
        asOf: Instant;
    }): Promise<Board>;
    /** Corrections and retractions, oldest known first, across pages. */
    revisions(options?: {
        bankId?: number;
        from?: Instant;
        to?: Instant;
    }): AsyncGenerator<Revision>;
    /** A bank's publishing record over `days` (or every bank's). */
    quality(options: {
        bankId: number;
        days?: number;
    } & KnownAt): Promise<Quality>;
    quality(options?: {
        days?: number;
    } & KnownAt): Promise<Quality[]>;
    /**
     * The live stream's events; a dropped connection is made again with Last-Event-ID.
     * With `snapshot`, it starts with every matching bank's board and currency's best rates.
     */
    stream(options?: {
        events?: string[];
        bankIds?: number[];
        currencies?: string[];
        snapshot?: boolean;
        signal?: AbortSignal;
    }): AsyncGenerator<StreamEvent>;
}
/** Throws unless `body` (the raw bytes or text received) was signed with `secret` within five minutes. */
export declare function verifyWebhook(secret: string, headers: Record<string, string | undefined> | Headers, body: string | Uint8Array, now?: number): Promise<void>;
