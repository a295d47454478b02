-- CreateTable
CREATE TABLE "daily_reports" (
    "day" DATE NOT NULL,
    "timezone" VARCHAR(64) NOT NULL,
    "figures" JSONB NOT NULL,
    "generated_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "daily_reports_pkey" PRIMARY KEY ("day","timezone")
);

