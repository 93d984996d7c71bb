/**
 * Where `persist` keeps a user's conversation id: one entry of a `Storage`
 * (`localStorage` by default), and nothing else. A storage that is missing,
 * disabled or full only costs the resume after a reload. The key is
 * `@thinwire/client`'s `contextStorageKey`, which server code imports from there.
 */
import { contextStorageKey, type PersistStorage } from "@thinwire/client";

export { contextStorageKey };

export interface ContextStorage {
  read(): string | null;
  /** Stores the id; null removes the entry. */
  write(id: string | null): void;
}

/** The id store of `userId`'s conversation with `agent`, or null without a usable storage. */
export function contextStorage(agent: string, persist: { userId: string; storage?: PersistStorage }): ContextStorage | null {
  const storage = persist.storage ?? defaultStorage();
  if (!storage) return null;
  const key = contextStorageKey(agent, persist.userId);
  return {
    read() {
      try {
        return storage.getItem(key) || null;
      } catch {
        return null;
      }
    },
    write(id) {
      try {
        if (id === null) storage.removeItem(key);
        else storage.setItem(key, id);
      } catch {
        // A full or disabled storage only costs the resume after a reload.
      }
    },
  };
}

function defaultStorage(): PersistStorage | null {
  try {
    return typeof window === "undefined" ? null : window.localStorage;
  } catch {
    return null; // storage disabled (privacy mode, sandboxed frame)
  }
}
